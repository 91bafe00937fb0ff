//! TopK against sort-then-truncate.

use ordered_float::OrderedFloat;
use proptest::prelude::*;
use slate_vector::{RowId, TopK};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn topk_equals_sort_then_truncate(
        // Few distinct distances and ids so that ties are common.
        items in prop::collection::vec((0u8..8, prop::collection::vec(0u8..4, 0..3)), 0..200),
        k in 1usize..20,
        split in 0usize..200,
    ) {
        // Unique ids: append the position.
        let ids: Vec<Vec<u8>> = items
            .iter()
            .enumerate()
            .map(|(i, (_, id))| {
                let mut id = id.clone();
                id.extend_from_slice(&(i as u16).to_be_bytes());
                id
            })
            .collect();
        let mut want: Vec<(f32, &[u8], u32)> = items
            .iter()
            .zip(&ids)
            .enumerate()
            .map(|(i, ((d, _), id))| (f32::from(*d) / 2.0, &id[..], i as u32))
            .collect();
        want.sort_by(|a, b| (OrderedFloat(a.0), a.1).cmp(&(OrderedFloat(b.0), b.1)));
        want.truncate(k);

        let mut whole = TopK::new(k).unwrap();
        let mut left = TopK::new(k).unwrap();
        let mut right = TopK::new(k).unwrap();
        for (i, ((d, _), id)) in items.iter().zip(&ids).enumerate() {
            let d = f32::from(*d) / 2.0;
            let entered_check = whole.would_enter(d, id);
            prop_assert_eq!(whole.push(d, id, RowId(i as u32)), entered_check);
            let half = if i < split { &mut left } else { &mut right };
            half.push(d, id, RowId(i as u32));
        }
        left.merge(right);
        let got: Vec<(f32, &[u8], u32)> =
            whole.into_sorted_vec().iter().map(|c| (c.distance, c.id, c.row.0)).collect();
        let merged: Vec<(f32, &[u8], u32)> =
            left.into_sorted_vec().iter().map(|c| (c.distance, c.id, c.row.0)).collect();
        prop_assert_eq!(&got, &want);
        prop_assert_eq!(&merged, &want);
    }
}
