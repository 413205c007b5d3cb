//! Opening `libzdnn.so.0` at run time and resolving its functions.

use std::ffi::{c_int, CStr, OsString};

use libloading::Library;

use crate::status::{status_message, Status};
use crate::types::*;

/// Why zDNN could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// zDNN only exists on s390x; no load is attempted on other targets.
    #[error("zDNN is only available on s390x")]
    NotAvailable,
    /// The shared library could not be opened.
    #[error("cannot open {path:?}: {source}")]
    Open {
        /// Path or soname that was tried.
        path: OsString,
        /// The loader's error.
        source: libloading::Error,
    },
    /// The library lacks a function we need.
    #[error("zDNN library lacks symbol {symbol}: {source}")]
    MissingSymbol {
        /// Name of the missing function.
        symbol: &'static str,
        /// The loader's error.
        source: libloading::Error,
    },
}

/// A loaded zDNN library with the functions the engine uses. The function pointers stay valid
/// while this value (which owns the library handle) lives.
pub struct Zdnn {
    /// `zdnn_is_nnpa_installed`.
    pub is_nnpa_installed: IsNnpaInstalledFn,
    /// `zdnn_get_nnpa_max_dim_idx_size`.
    pub get_nnpa_max_dim_idx_size: GetNnpaMaxDimIdxSizeFn,
    /// `zdnn_get_nnpa_max_tensor_size`.
    pub get_nnpa_max_tensor_size: GetNnpaMaxTensorSizeFn,
    /// `zdnn_is_nnpa_parmblk_fmt_installed`.
    pub is_nnpa_parmblk_fmt_installed: IsNnpaParmblkFmtInstalledFn,
    /// `zdnn_init_pre_transformed_desc`.
    pub init_pre_transformed_desc: InitPreTransformedDescFn,
    /// `zdnn_generate_transformed_desc`.
    pub generate_transformed_desc: GenerateTransformedDescFn,
    /// `zdnn_init_ztensor_with_malloc`.
    pub init_ztensor_with_malloc: InitZtensorWithMallocFn,
    /// `zdnn_getsize_ztensor`.
    pub getsize_ztensor: GetsizeZtensorFn,
    /// `zdnn_transform_ztensor`.
    pub transform_ztensor: TransformZtensorFn,
    /// `zdnn_transform_origtensor`.
    pub transform_origtensor: TransformOrigtensorFn,
    /// `zdnn_reset_ztensor`.
    pub reset_ztensor: ResetZtensorFn,
    /// `zdnn_free_ztensor_buffer`.
    pub free_ztensor_buffer: FreeZtensorBufferFn,
    /// `zdnn_matmul_op`.
    pub matmul_op: MatmulOpFn,
    /// `zdnn_matmul_transpose_op`.
    pub matmul_transpose_op: MatmulTransposeOpFn,
    /// `zdnn_get_status_message`.
    pub get_status_message: GetStatusMessageFn,
    /// `zdnn_get_library_version`.
    pub get_library_version: GetLibraryVersionFn,
    _library: Library,
}

impl std::fmt::Debug for Zdnn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Zdnn").finish_non_exhaustive()
    }
}

/// Copy a typed function pointer out of `lib`.
macro_rules! resolve {
    ($lib:expr, $name:literal) => {{
        // SAFETY: the symbol is zDNN's function of that name; its C signature is the one the
        // declared pointer type spells (zdnn.h, ABI notes), and the pointer is only used while
        // the library handle is alive (both live in the same `Zdnn`).
        let symbol = unsafe { $lib.get(concat!($name, "\0").as_bytes()) };
        *symbol.map_err(|source| LoadError::MissingSymbol {
            symbol: $name,
            source,
        })?
    }};
}

impl Zdnn {
    /// The library's soname.
    pub const DEFAULT_LIBRARY: &'static str = "libzdnn.so.0";
    /// Environment variable that overrides the library path.
    pub const LIBRARY_ENV: &'static str = "LOCAL_LLM_ZDNN_LIB";

    /// Open zDNN (`$LOCAL_LLM_ZDNN_LIB`, else `libzdnn.so.0`) on s390x. On every other target
    /// this returns [`LoadError::NotAvailable`] without touching the file system.
    pub fn load() -> Result<Self, LoadError> {
        if !cfg!(target_arch = "s390x") {
            return Err(LoadError::NotAvailable);
        }
        let path = std::env::var_os(Self::LIBRARY_ENV)
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| Self::DEFAULT_LIBRARY.into());
        Self::load_from(path)
    }

    /// Open the library at `path` (any target) and resolve every function; a library without
    /// one of them is [`LoadError::MissingSymbol`].
    pub fn load_from(path: impl Into<OsString>) -> Result<Self, LoadError> {
        let path = path.into();
        // SAFETY: opening a shared library runs its initialisers; zDNN's only runs `zdnn_init`.
        // Any other library given by the user is their responsibility (documented variable).
        let library = unsafe { Library::new(&path) }.map_err(|source| LoadError::Open {
            path: path.clone(),
            source,
        })?;
        Ok(Zdnn {
            is_nnpa_installed: resolve!(library, "zdnn_is_nnpa_installed"),
            get_nnpa_max_dim_idx_size: resolve!(library, "zdnn_get_nnpa_max_dim_idx_size"),
            get_nnpa_max_tensor_size: resolve!(library, "zdnn_get_nnpa_max_tensor_size"),
            is_nnpa_parmblk_fmt_installed: resolve!(library, "zdnn_is_nnpa_parmblk_fmt_installed"),
            init_pre_transformed_desc: resolve!(library, "zdnn_init_pre_transformed_desc"),
            generate_transformed_desc: resolve!(library, "zdnn_generate_transformed_desc"),
            init_ztensor_with_malloc: resolve!(library, "zdnn_init_ztensor_with_malloc"),
            getsize_ztensor: resolve!(library, "zdnn_getsize_ztensor"),
            transform_ztensor: resolve!(library, "zdnn_transform_ztensor"),
            transform_origtensor: resolve!(library, "zdnn_transform_origtensor"),
            reset_ztensor: resolve!(library, "zdnn_reset_ztensor"),
            free_ztensor_buffer: resolve!(library, "zdnn_free_ztensor_buffer"),
            matmul_op: resolve!(library, "zdnn_matmul_op"),
            matmul_transpose_op: resolve!(library, "zdnn_matmul_transpose_op"),
            get_status_message: resolve!(library, "zdnn_get_status_message"),
            get_library_version: resolve!(library, "zdnn_get_library_version"),
            _library: library,
        })
    }

    /// Whether the machine has an NNPA.
    pub fn nnpa_installed(&self) -> bool {
        // SAFETY: no arguments; zDNN reads its cached query result.
        unsafe { (self.is_nnpa_installed)() }
    }

    /// The NNPA's maximum dimension index size (0 without an NNPA).
    pub fn max_dim_idx_size(&self) -> u32 {
        // SAFETY: no arguments.
        unsafe { (self.get_nnpa_max_dim_idx_size)() }
    }

    /// The NNPA's maximum tensor size in bytes (0 without an NNPA).
    pub fn max_tensor_size(&self) -> u64 {
        // SAFETY: no arguments.
        unsafe { (self.get_nnpa_max_tensor_size)() }
    }

    /// Whether the NNPA supports parameter-block format `format` (e.g. [`crate::NNPA_PARMBLKFORMAT_1`]).
    pub fn parmblk_fmt_installed(&self, format: u32) -> bool {
        // SAFETY: the count (1) matches the number of variadic `int` arguments passed.
        unsafe { (self.is_nnpa_parmblk_fmt_installed)(1, format as c_int) }
    }

    /// The library version (`0x010200` for 1.2.0).
    pub fn library_version(&self) -> u32 {
        // SAFETY: no arguments.
        unsafe { (self.get_library_version)() }
    }

    /// The library's message for `status` (our own text if it returns none).
    pub fn status_message(&self, status: Status) -> String {
        // SAFETY: zDNN returns a pointer to a static NUL-terminated string (or null).
        let ptr = unsafe { (self.get_status_message)(status) };
        if ptr.is_null() {
            return status_message(status).to_string();
        }
        // SAFETY: non-null, NUL-terminated and static (see above).
        unsafe { CStr::from_ptr(ptr) }
            .to_string_lossy()
            .into_owned()
    }
}
