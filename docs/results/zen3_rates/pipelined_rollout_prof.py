# cProfile of a short PQN fast run, synchronous (sync) or pipelined (pipe, needs the reverted pipelined-rollout commit).
import cProfile, pstats, sys
from rapidrl.cli import main
if __name__ == "__main__":
    v = sys.argv[1]
    extra = ["--backend", "async", "--num-workers", "2", "--env-batch-size", "16"] if v == "pipe" else []
    argv = ["train", "pqn", "--env", "pong", "--preset", "fast", "--max-frames", "60000", "--no-tensorboard", "--no-progress", "--run-dir", f"/tmp/ab/prof-{v}", "--start-e", "0.01", "--end-e", "0.01"] + extra
    pr = cProfile.Profile(); pr.enable(); main(argv); pr.disable()
    st = pstats.Stats(pr); st.sort_stats("tottime").print_stats(14)
