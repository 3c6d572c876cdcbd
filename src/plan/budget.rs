//! Sharing a byte budget: water-filling (every part gets what it asks for
//! when that is less than an equal share of what is left, the others share
//! the rest). Pure.

/// Shares `room` bytes among parts that ask for `demands`: a part asking
/// less than an equal share of what is left gets all it asks; the rest
/// split what remains equally. The shares never add up to more than `room`.
pub fn water_fill(demands: &[usize], room: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..demands.len()).collect();
    order.sort_by_key(|&i| demands[i]);
    let mut shares = vec![0; demands.len()];
    let mut left = room;
    for (done, &i) in order.iter().enumerate() {
        let equal = left / (demands.len() - done);
        shares[i] = demands[i].min(equal);
        left -= shares[i];
    }
    shares
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_demands_are_met_and_large_ones_share_the_rest() {
        assert_eq!(water_fill(&[10, 100, 100], 110), vec![10, 50, 50]);
        assert_eq!(water_fill(&[10, 20], 100), vec![10, 20]);
        assert_eq!(water_fill(&[], 100), Vec::<usize>::new());
        assert_eq!(water_fill(&[7, 7, 7], 10), vec![3, 3, 4], "never more than the room");
    }
}
