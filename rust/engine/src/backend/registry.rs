//! The device registry: which devices exist on this host and where each weight goes.

use std::sync::Arc;

use super::{cpu, Device, DeviceInfo, MatmulShape, TensorBytes, Weight};

/// The devices available to the engine: accelerators, which get every weight they support, then
/// the CPU, which is always present and runs everything else.
pub struct Registry {
    accelerators: Vec<Arc<dyn Device>>,
}

impl Registry {
    /// The devices found on this host: the CPU, plus the NNPA when zDNN reports one (s390x), or
    /// the emulated NNPA when `LOCAL_LLM_NNPA_EMULATE=1` (feature `nnpa-emulator`).
    pub fn detect() -> Self {
        #[cfg(any(feature = "nnpa-emulator", target_arch = "s390x"))]
        let accelerators = super::nnpa::detect();
        #[cfg(not(any(feature = "nnpa-emulator", target_arch = "s390x")))]
        let accelerators = Vec::new();
        Registry::with_accelerators(accelerators)
    }

    /// A registry with the given accelerators ahead of the CPU.
    pub fn with_accelerators(accelerators: Vec<Arc<dyn Device>>) -> Self {
        Registry { accelerators }
    }

    /// Descriptions of every device, accelerators first, the CPU last.
    pub fn devices(&self) -> Vec<DeviceInfo> {
        let accelerators = self.accelerators.iter().map(|d| d.info());
        accelerators.chain([cpu::device_info()]).collect()
    }

    /// Place a weight on the first accelerator that supports it, else on the CPU. A device that
    /// fails to take the weight is logged and skipped.
    pub fn place(&self, shape: MatmulShape, data: TensorBytes) -> Weight {
        for device in &self.accelerators {
            if !device.supports_matmul(shape) {
                continue;
            }
            match device.place_weight(shape, &data) {
                Ok(placed) => return Weight::on_device(shape, data, placed),
                Err(e) => crate::log::warn(&format!(
                    "{}: cannot place a {}x{} {} weight ({e}); using the CPU",
                    device.info().name,
                    shape.rows,
                    shape.cols,
                    shape.ty
                )),
            }
        }
        Weight::on_cpu(shape, data)
    }
}

impl Default for Registry {
    fn default() -> Self {
        Registry::detect()
    }
}
