//! Dequantization and activation quantization checked against the PyPI `gguf` package's numpy
//! implementation (tools/gguf-oracle/quant_oracle.py), on random blocks and on every tensor of
//! the two real models.

mod common;
mod quant_support;

use std::collections::HashMap;
use std::path::PathBuf;

use half::f16;
use local_llm_engine::quant::{dequantize, quantize_row, GgmlType};
use quant_support::{random_row, read_f32, run_oracle, scratch_dir, Rng};

const DEQUANT_TYPES: [GgmlType; 27] = GgmlType::ALL;

/// Elements per type in the dequantization test: for the codebook formats enough random
/// indices that every grid entry is looked up (≥ 16 draws per entry of the largest grid, IQ1's
/// 2048: P(an entry is missed) < 2048·e⁻¹⁶).
fn elements(ty: GgmlType) -> usize {
    match ty {
        GgmlType::IQ2_XXS
        | GgmlType::IQ2_XS
        | GgmlType::IQ2_S
        | GgmlType::IQ3_XXS
        | GgmlType::IQ3_S
        | GgmlType::IQ1_S
        | GgmlType::IQ1_M => 256 * 1024,
        _ => 256 * 16,
    }
}

#[test]
fn dequantize_matches_gguf_numpy_bit_for_bit() {
    let dir = scratch_dir("dequant");
    let mut rng = Rng::new(7);
    let mut manifest = String::new();
    let mut rows = HashMap::new();
    for ty in DEQUANT_TYPES {
        let n = elements(ty);
        let mut row = random_row(&mut rng, ty, n);
        if ty == GgmlType::MXFP4 {
            // Every E8M0 exponent, subnormal (0, 1) and overflowing (≥ 252) ones included.
            for (i, b) in row.chunks_exact_mut(ty.type_size()).enumerate() {
                b[0] = i as u8;
            }
        }
        std::fs::write(dir.join(format!("{ty}.bin")), &row).unwrap();
        manifest += &format!("{ty} {n} {ty}\n");
        rows.insert(ty, row);
    }
    std::fs::write(dir.join("manifest.txt"), manifest).unwrap();
    run_oracle(&["dequant", dir.to_str().unwrap()]);
    let skipped = std::fs::read_to_string(dir.join("skipped.txt")).unwrap();
    let skipped: Vec<&str> = skipped.lines().collect();
    // gguf has no numpy (de)quantizer for the activation formats Q8_1 and Q8_K.
    assert!(
        skipped.iter().all(|s| ["Q8_1", "Q8_K"].contains(s)),
        "skipped: {skipped:?}"
    );
    let mut compared = 0;
    for ty in DEQUANT_TYPES {
        let n = elements(ty);
        let mut ours = vec![0f32; n];
        dequantize(ty, &rows[&ty], &mut ours).unwrap();
        if skipped.contains(&ty.name()) {
            // Independent check of the trivial formats: value = d · q.
            let q8_1 = ty == GgmlType::Q8_1;
            let (ts, qs) = if q8_1 { (36, 4) } else { (292, 4) };
            let d_of = |b: &[u8]| {
                if q8_1 {
                    f16::from_le_bytes([b[0], b[1]]).to_f32()
                } else {
                    f32::from_le_bytes([b[0], b[1], b[2], b[3]])
                }
            };
            let bs = ty.block_size();
            for (i, &v) in ours.iter().enumerate() {
                let b = &rows[&ty][i / bs * ts..(i / bs + 1) * ts];
                assert_eq!(
                    v,
                    d_of(b) * f32::from(b[qs + i % bs] as i8),
                    "{ty} element {i}"
                );
            }
            continue;
        }
        let theirs = read_f32(&dir.join(format!("{ty}.f32")));
        assert_eq!(theirs.len(), n);
        for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
            assert_eq!(
                a.to_bits(),
                b.to_bits(),
                "{ty} element {i}: ours {a} gguf {b}"
            );
        }
        compared += 1;
    }
    assert_eq!(compared, 25);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn dequantize_rejects_bad_lengths_without_panicking() {
    let mut out = vec![0f32; 64];
    assert!(dequantize(GgmlType::Q4_0, &[0u8; 35], &mut out).is_err());
    assert!(dequantize(GgmlType::Q4_0, &[0u8; 37], &mut out).is_err());
    assert!(dequantize(GgmlType::Q4_K, &[0u8; 144], &mut out).is_err());
    assert!(dequantize(GgmlType::F32, &[0u8; 255], &mut out).is_err());
    assert!(dequantize(GgmlType::Q4_0, &[0u8; 36], &mut out).is_ok());
    let mut q = vec![0u8; 144];
    assert!(quantize_row(GgmlType::Q4_K, &[0f32; 256], &mut q).is_err());
    assert!(quantize_row(GgmlType::Q8_0, &[0f32; 48], &mut [0u8; 51]).is_err());
    assert!(quantize_row(GgmlType::Q8_0, &[0f32; 64], &mut [0u8; 67]).is_err());
}

/// Random activations with a few special blocks: all zeros, ties at ±0.5 steps, one huge value.
fn activations(rng: &mut Rng, n: usize) -> Vec<f32> {
    let mut x: Vec<f32> = (0..n).map(|_| rng.value()).collect();
    x[0..256].fill(0.0);
    for (i, v) in x[256..288].iter_mut().enumerate() {
        *v = (i as f32 - 15.5) * 0.5;
    }
    x[300] = 1.0e4;
    x
}

#[test]
fn activation_quantization_matches_gguf_numpy() {
    let dir = scratch_dir("quantize");
    let mut rng = Rng::new(11);
    let n = 4096;
    let x = activations(&mut rng, n);
    let bytes: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
    let types = [GgmlType::Q8_0, GgmlType::F16, GgmlType::BF16];
    let mut manifest = String::new();
    for ty in types {
        std::fs::write(dir.join(format!("{ty}.f32in")), &bytes).unwrap();
        manifest += &format!("{ty} {n} {ty}\n");
    }
    std::fs::write(dir.join("quant_manifest.txt"), manifest).unwrap();
    run_oracle(&["quantize", dir.to_str().unwrap()]);
    for ty in types {
        let mut ours = vec![0u8; ty.row_bytes(n as u64).unwrap() as usize];
        quantize_row(ty, &x, &mut ours).unwrap();
        let theirs = std::fs::read(dir.join(format!("{ty}.q"))).unwrap();
        assert_eq!(ours.len(), theirs.len(), "{ty}");
        if ty != GgmlType::Q8_0 {
            let first = ours.iter().zip(&theirs).position(|(a, b)| a != b);
            assert_eq!(first, None, "{ty}: first differing byte");
            continue;
        }
        // Q8_0 activations follow llama.cpp's x86 quantizer (multiplier 127/amax, ties to
        // even), which is what the oracle llama.cpp runs here; gguf's reference divides by d and
        // rounds ties away from zero. Same scales; quants may differ by one step, rarely.
        let mut differing = 0;
        for (b, (o, t)) in ours
            .chunks_exact(34)
            .zip(theirs.chunks_exact(34))
            .enumerate()
        {
            assert_eq!(o[0..2], t[0..2], "Q8_0 block {b} scale");
            for (qo, qt) in o[2..].iter().zip(&t[2..]) {
                let step = (i32::from(*qo as i8) - i32::from(*qt as i8)).abs();
                assert!(step <= 1, "Q8_0 block {b}: {} vs {}", *qo as i8, *qt as i8);
                differing += step as usize;
            }
        }
        assert!(
            differing * 100 <= n,
            "{differing} of {n} Q8_0 quants differ"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn q8_1_and_q8_k_follow_the_ggml_reference_rules() {
    // gguf has no quantizer for these formats; check the defining rules instead.
    let mut rng = Rng::new(5);
    let n = 2048;
    let x = activations(&mut rng, n);
    let mut q81 = vec![0u8; 36 * n / 32];
    quantize_row(GgmlType::Q8_1, &x, &mut q81).unwrap();
    let mut q80 = vec![0u8; 34 * n / 32];
    quantize_row(GgmlType::Q8_0, &x, &mut q80).unwrap();
    for (b, (blk, blk0)) in q81.chunks_exact(36).zip(q80.chunks_exact(34)).enumerate() {
        // Same d and quants as Q8_0, s = half(d_f32 · Σq).
        assert_eq!(blk[0..2], blk0[0..2], "block {b} d");
        assert_eq!(blk[4..36], blk0[2..34], "block {b} quants");
        let amax = x[32 * b..32 * b + 32]
            .iter()
            .fold(0f32, |m, v| m.max(v.abs()));
        let sum: i32 = blk[4..36].iter().map(|&q| i32::from(q as i8)).sum();
        let s = f16::from_f32(sum as f32 * (amax / 127.0));
        assert_eq!(blk[2..4], s.to_bits().to_le_bytes(), "block {b} s");
    }
    let mut q8k = vec![0u8; 292 * n / 256];
    quantize_row(GgmlType::Q8_K, &x, &mut q8k).unwrap();
    for (b, blk) in q8k.chunks_exact(292).enumerate() {
        let xs = &x[256 * b..256 * (b + 1)];
        let d = f32::from_le_bytes([blk[0], blk[1], blk[2], blk[3]]);
        let q: Vec<i32> = blk[4..260].iter().map(|&v| i32::from(v as i8)).collect();
        for g in 0..16 {
            let s: i32 = q[16 * g..16 * g + 16].iter().sum();
            let stored = i16::from_le_bytes([blk[260 + 2 * g], blk[261 + 2 * g]]);
            assert_eq!(i32::from(stored), s, "block {b} bsum {g}");
        }
        let imax = (0..256).fold(0, |m, i| if xs[i].abs() > xs[m].abs() { i } else { m });
        if xs[imax] == 0.0 {
            assert!(d == 0.0 && q.iter().all(|&v| v == 0), "zero block {b}");
            continue;
        }
        assert_eq!(
            q[imax], -127,
            "block {b}: the largest magnitude maps to -127"
        );
        assert_eq!(d, 1.0 / (-127.0 / xs[imax]), "block {b} d");
        for (i, (&qi, &xi)) in q.iter().zip(xs).enumerate() {
            let exact = xi * (-127.0 / xs[imax]);
            assert!(
                (qi as f32 - exact).abs() <= 0.5,
                "block {b} element {i}: {qi} vs {exact}"
            );
        }
    }
}

/// The checksum the oracle computes: Σ bits[k] · (k · 0x9E3779B97F4A7C15 + 1) mod 2^64.
fn checksum(values: &[f32], start: u64) -> u64 {
    values.iter().enumerate().fold(0u64, |acc, (i, v)| {
        let k = start + i as u64;
        acc.wrapping_add(
            u64::from(v.to_bits())
                .wrapping_mul(k.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(1)),
        )
    })
}

/// Every element of every tensor is compared (GGUFReader's metadata parsing dominates the run
/// time anyway); set `QUANT_SAMPLE=1` to compare only a sample of rows per tensor (about 64K
/// elements, always including the first and last row).
#[test]
fn model_tensors_match_gguf_numpy() {
    let Some(present) = ["smollm2", "gemma3"]
        .iter()
        .map(|m| common::real_model(m))
        .collect::<Option<Vec<PathBuf>>>()
    else {
        return;
    };
    let dir = scratch_dir("models");
    let full = !std::env::var("QUANT_SAMPLE").is_ok_and(|v| v == "1");
    // Both oracle runs in parallel: GGUFReader's metadata parsing dominates their run time.
    let jobs: Vec<_> = present
        .iter()
        .enumerate()
        .map(|(i, path)| {
            let out = dir.join(format!("model{i}.json"));
            let mut cmd = std::process::Command::new("python3");
            cmd.arg(quant_support::oracle_script())
                .arg("model")
                .arg(path)
                .arg(&out);
            if full {
                cmd.arg("full");
            }
            (path, out, cmd.spawn().expect("spawn python3"))
        })
        .collect();
    let mut seen_types = std::collections::BTreeSet::new();
    let mut rng = Rng::new(3);
    let mut tensors = 0;
    for (path, out, mut child) in jobs {
        assert!(
            child.wait().unwrap().success(),
            "oracle failed on {}",
            path.display()
        );
        let records: Vec<serde_json::Value> =
            serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
        let file = std::fs::File::open(path).unwrap();
        // SAFETY: read-only mapping of a model file nobody modifies during the test.
        let map = unsafe { memmap2::Mmap::map(&file) }.unwrap();
        for r in &records {
            let name = r["name"].as_str().unwrap();
            let ty = GgmlType::from_code(r["type"].as_u64().unwrap() as u32).unwrap();
            let offset = r["offset"].as_u64().unwrap() as usize;
            let ne0 = r["ne0"].as_u64().unwrap() as usize;
            let rows = r["rows"].as_u64().unwrap() as usize;
            let row_bytes = ty.row_bytes(ne0 as u64).unwrap() as usize;
            assert_eq!(
                row_bytes * rows,
                r["n_bytes"].as_u64().unwrap() as usize,
                "{name}"
            );
            let mut k = 0u64;
            let mut sum = 0u64;
            let mut buf = vec![0f32; ne0];
            for row in r["picked"].as_array().unwrap() {
                let at = offset + row.as_u64().unwrap() as usize * row_bytes;
                dequantize(ty, &map[at..at + row_bytes], &mut buf).unwrap();
                sum = sum.wrapping_add(checksum(&buf, k));
                k += ne0 as u64;
            }
            assert_eq!(
                sum,
                r["checksum"].as_u64().unwrap(),
                "{}: tensor {name} ({ty})",
                path.display()
            );
            // The dot kernels on a real row (realistic scales) against the f64 reference.
            let row0 = map[offset..offset + row_bytes].to_vec();
            quant_support::case_for_row(&mut rng, ty, ne0, row0).check(ty, ne0);
            seen_types.insert(ty.name());
            tensors += 1;
        }
    }
    eprintln!("compared {tensors} tensors of types {seen_types:?} (full: {full})");
    let _ = std::fs::remove_dir_all(&dir);
}
