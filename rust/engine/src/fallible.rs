//! Fallible allocation of buffers whose size comes from an option or a file (batch sizes,
//! context sizes, vocabulary): a buffer the process cannot hold is an
//! [`Error::InsufficientMemory`] naming it, never an allocation-failure abort.

use crate::{Error, Result};

/// Resizes `v` to `n` elements (new ones are `value`), reserving the memory fallibly first.
/// `what` names the buffer in the error.
pub(crate) fn resize<T: Clone>(v: &mut Vec<T>, n: usize, value: T, what: &str) -> Result<()> {
    if let Some(more) = n.checked_sub(v.len()) {
        v.try_reserve_exact(more).map_err(|_| error::<T>(n, what))?;
    }
    v.resize(n, value);
    Ok(())
}

/// A vector of `n` copies of `value`, allocated fallibly.
pub(crate) fn vec<T: Clone>(n: usize, value: T, what: &str) -> Result<Vec<T>> {
    let mut v = Vec::new();
    resize(&mut v, n, value, what)?;
    Ok(v)
}

/// Reserves room for `more` elements beyond `v.len()`, fallibly.
pub(crate) fn reserve<T>(v: &mut Vec<T>, more: usize, what: &str) -> Result<()> {
    v.try_reserve(more)
        .map_err(|_| error::<T>(v.len().saturating_add(more), what))
}

/// The error for a buffer of `n` elements of `T`.
fn error<T>(n: usize, what: &str) -> Error {
    let bytes = (n as u128) * (std::mem::size_of::<T>() as u128);
    Error::InsufficientMemory(format!("cannot allocate {what} ({bytes} bytes)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn impossible_sizes_are_typed_errors() {
        let e = vec(usize::MAX / 2, 0f32, "the test buffer").unwrap_err();
        assert!(
            matches!(&e, Error::InsufficientMemory(m) if m.contains("the test buffer")),
            "{e}"
        );
        let mut v = vec![1u8; 3];
        assert!(reserve(&mut v, usize::MAX, "more").is_err());
        resize(&mut v, 5, 2, "small").unwrap();
        assert_eq!(v, [1, 1, 1, 2, 2]);
        resize(&mut v, 1, 0, "shrink").unwrap();
        assert_eq!(v, [1]);
    }
}
