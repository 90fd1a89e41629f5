from rapidrl.train.schedules import linear_schedule


def test_linear_schedule_interpolates_then_holds_the_end():
    assert linear_schedule(1.0, 0.1, 10, 0) == 1.0
    assert abs(linear_schedule(1.0, 0.1, 10, 5) - 0.55) < 1e-12
    assert linear_schedule(1.0, 0.1, 10, 10) == 0.1
    assert linear_schedule(1.0, 0.1, 10, 1000) == 0.1
    assert linear_schedule(1.0, 0.1, 0, 0) == 0.1  # no duration: the end value at once
