use super::*;
use proptest::prelude::*;

#[test]
fn a_first_burst_is_measured_over_the_minimum_span() {
    let window = QuotaWindow::default();
    let mut rate = SampledRate::new();
    rate.record(&window, 10_000.0, 5_000);
    assert_eq!(rate.window_ms(&window, 5_000), 10_000);
    assert!((rate.rate_per_second(&window, 5_000) - 1_000.0).abs() < 1e-9);
}

#[test]
fn a_steady_stream_is_measured_at_its_rate() {
    let window = QuotaWindow::default();
    let mut rate = SampledRate::new();
    // 1,000 bytes every 100 ms for 30 s: 10,000 bytes per second.
    for step in 0..300u64 {
        rate.record(&window, 1_000.0, step * 100);
    }
    let measured = rate.rate_per_second(&window, 29_950);
    assert!((measured - 10_000.0).abs() < 1_000.0, "measured {measured}");
}

#[test]
fn samples_older_than_the_window_are_forgotten() {
    let window = QuotaWindow::new(3, 1_000);
    let mut rate = SampledRate::new();
    rate.record(&window, 9_000.0, 0);
    assert!(rate.total(&window, 2_999) > 0.0);
    assert_eq!(rate.total(&window, 3_000), 0.0);
    assert!(rate.is_idle(&window, 3_000));
    rate.record(&window, 1.0, 3_000);
    assert_eq!(rate.total(&window, 3_000), 1.0);
}

#[test]
fn at_most_the_configured_number_of_samples_is_kept() {
    let window = QuotaWindow::new(2, 1_000);
    let mut rate = SampledRate::new();
    rate.record(&window, 1.0, 0);
    rate.record(&window, 2.0, 1_000);
    rate.record(&window, 4.0, 1_500);
    assert_eq!(rate.samples.len(), 2);
    rate.record(&window, 8.0, 2_000);
    assert_eq!(rate.samples.len(), 2);
    assert_eq!(rate.total(&window, 2_000), 14.0);
}

#[test]
fn an_unrecorded_value_is_taken_back() {
    let window = QuotaWindow::default();
    let mut rate = SampledRate::new();
    rate.record(&window, 500.0, 10);
    rate.record(&window, -500.0, 20);
    assert_eq!(rate.total(&window, 20), 0.0);
}

#[test]
fn the_throttle_time_is_kafkas_formula() {
    // 20% over a 1,000/s quota, measured over 10 s: 2 s.
    assert_eq!(throttle_time_ms(1_200.0, 1_000.0, 10_000), 2_000);
    assert_eq!(throttle_time_ms(1_000.0, 1_000.0, 10_000), 0);
    assert_eq!(throttle_time_ms(999.0, 1_000.0, 10_000), 0);
    assert_eq!(throttle_time_ms(5.0, 0.0, 10_000), 0);
    assert_eq!(throttle_time_ms(f64::NAN, 1.0, 10_000), 0);
}

#[test]
fn the_max_value_in_a_window_is_samples_minus_one_windows() {
    let window = QuotaWindow::default();
    assert_eq!(window.max_value_in_window(1_000.0), 10_000.0);
    assert_eq!(QuotaWindow::new(1, 1_000).max_value_in_window(7.0), 7.0);
}

#[test]
fn the_bucket_starts_full_refills_and_refuses_below_zero() {
    let window = QuotaWindow::default();
    let mut bucket = TokenBucket::new();
    // Rate 2/s: a burst of 2 * 11 = 22 tokens.
    assert_eq!(bucket.tokens(&window, 2.0, 0), 22.0);
    bucket.take(&window, 2.0, 30.0, 0);
    assert_eq!(bucket.tokens(&window, 2.0, 0), -8.0);
    assert_eq!(bucket.throttle_time_ms(&window, 2.0, 0), 4_000);
    assert_eq!(bucket.throttle_time_ms(&window, 2.0, 1_000), 3_000);
    assert_eq!(bucket.throttle_time_ms(&window, 2.0, 4_000), 0);
    // Refilling stops at the burst.
    assert_eq!(bucket.tokens(&window, 2.0, 1_000_000), 22.0);
}

proptest! {
    #[test]
    fn throttle_is_zero_at_or_under_the_quota(
        bound in 1.0f64..1e9,
        share in 0.0f64..=1.0,
        window_ms in 1u64..100_000,
    ) {
        prop_assert_eq!(throttle_time_ms(bound * share, bound, window_ms), 0);
    }

    #[test]
    fn throttle_grows_with_the_overshoot(
        bound in 1.0f64..1e9,
        over_a in 0.0f64..10.0,
        over_b in 0.0f64..10.0,
        window_ms in 1u64..100_000,
    ) {
        let (low, high) = if over_a <= over_b { (over_a, over_b) } else { (over_b, over_a) };
        let throttle_low = throttle_time_ms(bound * (1.0 + low), bound, window_ms);
        let throttle_high = throttle_time_ms(bound * (1.0 + high), bound, window_ms);
        prop_assert!(throttle_low <= throttle_high);
        if high > 0.01 {
            prop_assert!(throttle_high > 0);
        }
    }

    /// After the throttle time, the same total over the longer span is the
    /// quota again (to the rounding of a millisecond).
    #[test]
    fn after_the_throttle_time_the_rate_is_back_at_the_quota(
        bound in 100.0f64..1e7,
        total_factor in 1.0f64..50.0,
        window_ms in 1_000u64..20_000,
    ) {
        let total = bound * window_ms as f64 / 1_000.0 * total_factor;
        let rate = total * 1_000.0 / window_ms as f64;
        let throttle = throttle_time_ms(rate, bound, window_ms);
        let rate_after = total * 1_000.0 / (window_ms + throttle) as f64;
        prop_assert!(rate_after <= bound * (1.0 + 1.0 / window_ms as f64) + 1e-6);
        prop_assert!(rate_after >= bound * (1.0 - 1.0 / window_ms as f64) - 1e-6);
    }

    /// The measured rate never exceeds what was recorded over the minimum
    /// span, and recording more never lowers it.
    #[test]
    fn recording_more_never_lowers_the_rate(
        values in proptest::collection::vec((0u64..500, 0.0f64..1e6), 1..50),
        extra in 0.0f64..1e6,
    ) {
        let window = QuotaWindow::default();
        let mut rate = SampledRate::new();
        let mut now_ms = 0;
        for (step_ms, value) in values {
            now_ms += step_ms;
            rate.record(&window, value, now_ms);
        }
        let before = rate.rate_per_second(&window, now_ms);
        rate.record(&window, extra, now_ms);
        prop_assert!(rate.rate_per_second(&window, now_ms) >= before);
    }
}
