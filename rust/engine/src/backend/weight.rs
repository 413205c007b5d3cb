//! A weight matrix placed on a device at load time, with CPU fallback.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};

use super::cpu::Epilogue;
use super::{cpu, DeviceWeight, MatmulShape, SharedMut, TensorBytes, Threads};
use crate::{Error, Result};

/// A 2-D weight (`rows` × `cols`) and where it runs. The CPU copy (often just the memory-mapped
/// bytes) is always kept so that a failing accelerator falls back to the CPU.
pub struct Weight {
    shape: MatmulShape,
    data: TensorBytes,
    placed: Option<Box<dyn DeviceWeight>>,
    fallback_logged: AtomicBool,
}

impl Weight {
    /// A weight that runs on the CPU.
    pub fn on_cpu(shape: MatmulShape, data: TensorBytes) -> Self {
        Weight {
            shape,
            data,
            placed: None,
            fallback_logged: AtomicBool::new(false),
        }
    }

    /// A weight placed on an accelerator, keeping `data` for CPU fallback.
    pub fn on_device(shape: MatmulShape, data: TensorBytes, placed: Box<dyn DeviceWeight>) -> Self {
        Weight {
            placed: Some(placed),
            ..Weight::on_cpu(shape, data)
        }
    }

    /// Shape and type.
    pub fn shape(&self) -> MatmulShape {
        self.shape
    }

    /// Name of the device the weight runs on.
    pub fn device_name(&self) -> &str {
        self.placed.as_ref().map_or("CPU", |p| p.device_name())
    }

    /// The weight's bytes in GGUF block layout.
    pub fn bytes(&self) -> &[u8] {
        self.data.as_slice()
    }

    /// `out[t*rows + r] = Σ_c w[r][c] · x[t*cols + c]` for `n_tokens` input rows.
    pub fn matmul(
        &self,
        x: &[f32],
        n_tokens: usize,
        out: &mut [f32],
        threads: &Threads,
    ) -> Result<()> {
        if let Some(placed) = &self.placed {
            match placed.matmul(x, n_tokens, out, threads) {
                Ok(()) => return Ok(()),
                Err(e) => {
                    if !self.fallback_logged.swap(true, Ordering::Relaxed) {
                        crate::log::warn(&format!(
                            "{} matmul failed ({e}); falling back to the CPU",
                            placed.device_name()
                        ));
                    }
                }
            }
        }
        cpu::matmul(self.shape, self.data.as_slice(), x, n_tokens, out, threads)
    }

    /// `outs[i] = weights[i] · x` (see [`Weight::matmul`]) for weights applied to the same
    /// input. The CPU weights of one type and width among them share one quantization of `x`
    /// and one dispatch to the threads; weights on a device run one by one.
    pub fn matmul_shared_input(
        weights: &[&Weight],
        x: &[f32],
        n_tokens: usize,
        outs: &mut [&mut [f32]],
        threads: &Threads,
    ) -> Result<()> {
        Weight::matmul_shared_input_then(weights, x, n_tokens, outs, threads, None)
    }

    /// [`Weight::matmul_shared_input`] with an [`Epilogue`] after each product (`part` being
    /// the index into `weights`): in the same tasks on the CPU, on the calling thread over all
    /// the rows after a device's product.
    pub(crate) fn matmul_shared_input_then(
        weights: &[&Weight],
        x: &[f32],
        n_tokens: usize,
        outs: &mut [&mut [f32]],
        threads: &Threads,
        epilogue: Option<&dyn Epilogue>,
    ) -> Result<()> {
        if weights.len() != outs.len() {
            return Err(Error::Backend(format!(
                "{} weights for {} outputs",
                weights.len(),
                outs.len()
            )));
        }
        let mut done = vec![false; weights.len()];
        for i in 0..weights.len() {
            if done[i] {
                continue;
            }
            let lead = weights[i];
            if lead.placed.is_some() {
                lead.matmul(x, n_tokens, outs[i], threads)?;
                if let Some(epilogue) = epilogue {
                    epilogue.after(i, 0..lead.shape.rows, SharedMut(outs[i].as_mut_ptr()));
                }
                done[i] = true;
                continue;
            }
            let MatmulShape { ty, cols, .. } = lead.shape;
            let joins = |j: usize| {
                let w = weights[j];
                !done[j] && w.placed.is_none() && w.shape.ty == ty && w.shape.cols == cols
            };
            let members: Vec<usize> = (i..weights.len()).filter(|&j| joins(j)).collect();
            let mut parts: Vec<cpu::Part> = outs
                .iter_mut()
                .enumerate()
                .filter(|(j, _)| members.contains(j))
                .map(|(j, out)| cpu::Part {
                    w: weights[j].bytes(),
                    rows: weights[j].shape.rows,
                    out,
                })
                .collect();
            let in_group = epilogue.map(|inner| InGroup {
                inner,
                members: &members,
            });
            let in_group = in_group.as_ref().map(|e| e as &dyn Epilogue);
            cpu::matmul_shared_input(ty, cols, &mut parts, x, n_tokens, threads, in_group)?;
            for j in members {
                done[j] = true;
            }
        }
        Ok(())
    }
}

/// An [`Epilogue`] of a [`Weight::matmul_shared_input_then`] call seen from one group of its
/// weights: the group's part `k` is the call's part `members[k]`.
struct InGroup<'a> {
    inner: &'a dyn Epilogue,
    members: &'a [usize],
}

impl Epilogue for InGroup<'_> {
    fn before(&self, part: usize, rows: Range<usize>) {
        self.inner.before(self.members[part], rows)
    }

    fn after(&self, part: usize, rows: Range<usize>, out: SharedMut<f32>) {
        self.inner.after(self.members[part], rows, out)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::quant::GgmlType;

    /// Records every call and adds `1000·(part + 1)` to the rows it is given.
    #[derive(Default)]
    struct Marks {
        before: Mutex<Vec<(usize, Range<usize>)>>,
        after: Mutex<Vec<(usize, Range<usize>)>>,
        rows: Vec<usize>,
        n_tokens: usize,
    }

    impl Epilogue for Marks {
        fn before(&self, part: usize, rows: Range<usize>) {
            self.before.lock().unwrap().push((part, rows));
        }

        fn after(&self, part: usize, rows: Range<usize>, out: SharedMut<f32>) {
            for t in 0..self.n_tokens {
                for r in rows.clone() {
                    // SAFETY: the epilogue's contract: these rows of every token are ours.
                    unsafe {
                        *out.get().add(t * self.rows[part] + r) += 1000.0 * (part + 1) as f32
                    };
                }
            }
            self.after.lock().unwrap().push((part, rows));
        }
    }

    /// Weights of two types (two groups, each one dispatch), decoding and a prompt, on two
    /// threads: each part's epilogue runs once on every row, after its products, with the
    /// part's index among all the weights, and a `before` for every `after`.
    #[test]
    fn the_epilogue_covers_every_row_of_every_part_once() {
        let threads = Threads::new(2).unwrap();
        let cols = 256;
        let specs = [
            (GgmlType::F32, 70),
            (GgmlType::F16, 33),
            (GgmlType::F32, 129),
        ];
        let weights: Vec<Weight> = specs
            .iter()
            .map(|&(ty, rows)| {
                let bytes = ty.row_bytes(cols as u64).unwrap() as usize * rows;
                let data = TensorBytes::owned(vec![0u8; bytes]);
                Weight::on_cpu(MatmulShape { ty, rows, cols }, data)
            })
            .collect();
        let refs: Vec<&Weight> = weights.iter().collect();
        for n_tokens in [1, 3, 40] {
            let x = vec![0.5f32; cols * n_tokens];
            let mut outs: Vec<Vec<f32>> = specs.iter().map(|s| vec![0.0; s.1 * n_tokens]).collect();
            let mut slices: Vec<&mut [f32]> = outs.iter_mut().map(|o| o.as_mut_slice()).collect();
            let marks = Marks {
                rows: specs.iter().map(|s| s.1).collect(),
                n_tokens,
                ..Marks::default()
            };
            Weight::matmul_shared_input_then(
                &refs,
                &x,
                n_tokens,
                &mut slices,
                &threads,
                Some(&marks),
            )
            .unwrap();
            for (part, out) in outs.iter().enumerate() {
                // Zero weights: only the epilogue's marks, each added once.
                let want = 1000.0 * (part + 1) as f32;
                assert!(
                    out.iter().all(|&v| v == want),
                    "part {part}, {n_tokens} tokens"
                );
            }
            let mut after = marks.after.into_inner().unwrap();
            let mut before = marks.before.into_inner().unwrap();
            after.sort_by_key(|(p, r)| (*p, r.start));
            before.sort_by_key(|(p, r)| (*p, r.start));
            assert_eq!(before, after);
        }
    }
}
