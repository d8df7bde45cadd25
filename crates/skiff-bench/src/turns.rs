//! The order a row's measured runs are taken in: each round runs every implementation once,
//! in the row's order (A B C A B C …), so a slow minute on a shared machine lands on one run
//! of each rather than on all runs of one.

/// `(repeat, implementation index)` pairs for `implementations` implementations and `repeats`
/// repeats each, in the order to run them; repeats count from 1.
pub fn turns(implementations: usize, repeats: u32) -> Vec<(u32, usize)> {
    (1..=repeats)
        .flat_map(|repeat| (0..implementations).map(move |i| (repeat, i)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_round_runs_each_implementation_once_in_row_order() {
        assert_eq!(
            turns(2, 3),
            [(1, 0), (1, 1), (2, 0), (2, 1), (3, 0), (3, 1)]
        );
        let three = turns(3, 5);
        assert_eq!(three.len(), 15);
        // Never the same implementation twice in a row when there are several.
        assert!(three.windows(2).all(|w| w[0].1 != w[1].1));
        // Each implementation gets every repeat number exactly once, in order.
        for i in 0..3 {
            let repeats: Vec<u32> = three.iter().filter(|t| t.1 == i).map(|t| t.0).collect();
            assert_eq!(repeats, [1, 2, 3, 4, 5]);
        }
    }

    #[test]
    fn a_lone_implementation_or_no_repeats() {
        assert_eq!(turns(1, 3), [(1, 0), (2, 0), (3, 0)]);
        assert!(turns(0, 5).is_empty());
        assert!(turns(4, 0).is_empty());
    }
}
