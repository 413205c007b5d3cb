//! The stickified 4DFEATURE layout against the formulas in zdnn.md: sizes and byte offsets for
//! awkward 2-D shapes and 3DS stacks, zeroed padding, and lossless read-back of DLFLOAT16 values.

use local_llm_engine::backend::nnpa::dlfloat;
use local_llm_engine::backend::nnpa::stickify::{StickShape, Stickified};

/// zdnn.md's 2-D offset: (⌊c/64⌋·⌈rows/32⌉ + ⌊r/32⌋)·4096 + (r mod 32)·128 + (c mod 64)·2,
/// plus `k`·⌈rows/32⌉·⌈cols/64⌉·4096 for entry `k` of a 3DS stack.
fn spec_offset(k: usize, r: usize, c: usize, rows: usize, cols: usize) -> usize {
    let entry = k * rows.div_ceil(32) * cols.div_ceil(64) * 4096;
    entry + ((c / 64) * rows.div_ceil(32) + r / 32) * 4096 + (r % 32) * 128 + (c % 64) * 2
}

/// Distinct, exactly representable values (so the cell check is exact).
fn value(k: usize, r: usize, c: usize) -> f32 {
    (1 + k * 100_000 + r * 300 + c) as f32 * 0.25
}

fn check(stack: usize, rows: usize, cols: usize, expected_size: usize) {
    let shape = if stack == 0 {
        StickShape::d2(rows, cols)
    } else {
        StickShape::d3s(stack, rows, cols)
    };
    let stack = stack.max(1);
    assert_eq!(
        shape.size_bytes(),
        Some(expected_size),
        "{stack}x{rows}x{cols}"
    );
    let mut values = Vec::new();
    for k in 0..stack {
        for r in 0..rows {
            for c in 0..cols {
                values.push(value(k, r, c));
            }
        }
    }
    let st = Stickified::from_f32(shape, &values).unwrap();
    assert_eq!(st.cells().len() * 2, expected_size);
    let mut owned = vec![false; st.cells().len()];
    for k in 0..stack {
        for r in 0..rows {
            for c in 0..cols {
                let off = spec_offset(k, r, c, rows, cols);
                assert_eq!(
                    shape.byte_offset(k, 0, r, c),
                    off,
                    "offset of ({k},{r},{c})"
                );
                let v = value(k, r, c);
                assert_eq!(
                    st.cells()[off / 2],
                    dlfloat::from_f32(v),
                    "cell ({k},{r},{c})"
                );
                assert!(!owned[off / 2], "two elements share byte {off}");
                owned[off / 2] = true;
            }
        }
    }
    for (i, (&cell, &used)) in st.cells().iter().zip(&owned).enumerate() {
        if !used {
            assert_eq!(cell, 0, "padding cell at byte {} is not zero", i * 2);
        }
    }
    let back = st.to_f32();
    let rounded: Vec<f32> = values.iter().map(|&v| dlfloat::round_f32(v)).collect();
    assert_eq!(back, rounded);
}

#[test]
fn one_by_one_takes_a_page() {
    check(0, 1, 1, 4096);
}

#[test]
fn three_by_seventy_takes_two_pages() {
    check(0, 3, 70, 8192);
}

#[test]
fn thirty_three_by_sixty_five() {
    check(0, 33, 65, 4 * 4096);
}

#[test]
fn many_columns() {
    check(0, 5, 200, 4 * 4096);
    check(0, 64, 129, 2 * 3 * 4096);
}

#[test]
fn stacks_of_2d_tensors() {
    check(3, 33, 65, 3 * 4 * 4096);
    check(2, 1, 1, 2 * 4096);
    check(4, 3, 70, 4 * 2 * 4096);
}

#[test]
fn one_dimensional_and_empty_shapes() {
    let s = StickShape::d1(100);
    assert_eq!(s.size_bytes(), Some(2 * 4096));
    assert_eq!(s.byte_offset(0, 0, 0, 99), 4096 + 35 * 2);
    assert!(Stickified::zeroed(StickShape::d2(0, 5)).is_err());
    assert!(Stickified::from_f32(StickShape::d2(2, 2), &[1.0; 3]).is_err());
    assert_eq!(StickShape::d2(usize::MAX, usize::MAX).size_bytes(), None);
}
