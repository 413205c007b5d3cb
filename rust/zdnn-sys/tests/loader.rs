//! Loading rules: no load attempt off s390x, typed errors for a missing library or symbol, and
//! status names/messages.

use zdnn_sys::*;

#[test]
fn load_is_not_attempted_off_s390x() {
    let r = Zdnn::load();
    if cfg!(target_arch = "s390x") {
        // On s390x without libzdnn (CI under qemu) the open fails; with it, it loads.
        if let Err(e) = r {
            assert!(matches!(e, LoadError::Open { .. }), "{e}");
        }
    } else {
        assert!(matches!(r, Err(LoadError::NotAvailable)));
    }
}

#[test]
fn missing_library_is_an_open_error() {
    let err = Zdnn::load_from("/nonexistent/libzdnn.so.0").unwrap_err();
    assert!(matches!(err, LoadError::Open { .. }), "{err}");
    assert!(err.to_string().contains("/nonexistent/libzdnn.so.0"));
}

#[test]
#[cfg(target_os = "linux")]
fn library_without_zdnn_symbols_is_a_missing_symbol_error() {
    // libc is present on every Linux host and has none of zDNN's functions.
    let err = Zdnn::load_from("libc.so.6").unwrap_err();
    match err {
        LoadError::MissingSymbol { symbol, .. } => assert_eq!(symbol, "zdnn_is_nnpa_installed"),
        other => panic!("expected MissingSymbol, got {other}"),
    }
}

#[test]
fn status_names_and_messages() {
    assert_eq!(status_name(ZDNN_OK), "ZDNN_OK");
    assert_eq!(status_name(0x0004_0001), "ZDNN_INVALID_SHAPE");
    assert_eq!(status_name(0x0010_0005), "ZDNN_UNSUPPORTED_AIU_EXCEPTION");
    assert_eq!(status_name(0x000C_0002), "ZDNN_UNAVAILABLE_FUNCTION");
    assert_eq!(status_name(0x000C_F003), "ZDNN_FUNC_RC_F00x");
    assert_eq!(status_name(0xDEAD), "ZDNN_UNKNOWN_STATUS");
    assert_eq!(ZDNN_INVALID_OFFSET, 0x0004_0012);
    assert_eq!(ZDNN_MISALIGNED_SAVEAREA, 0x000C_0015);
    assert!(status_message(ZDNN_EXCEEDS_MDIS).contains("maximum dimension"));
}

#[test]
fn enum_values_match_zdnn_h() {
    assert_eq!(
        (ZDNN_1D, ZDNN_2D, ZDNN_2DS, ZDNN_3DS, ZDNN_NHWC),
        (0, 1, 2, 4, 8)
    );
    assert_eq!((ZDNN_DLFLOAT16, FP32, FP16, BFLOAT), (0, 255, 254, 253));
    assert_eq!((ZDNN_FORMAT_4DFEATURE, ZDNN_FORMAT_4DGENERIC), (0, 31));
    assert_eq!((MATMUL_OP_ADDITION, MATMUL_OP_LESSER), (0, 6));
}
