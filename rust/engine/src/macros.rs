//! The emitter for option tables (e.g. [`crate::sampling_params_table`]): a table lists each
//! field once with its documentation and default, and this macro turns it into the public
//! struct and its `Default` impl. The FFI crate turns the same tables into UniFFI record
//! declarations, so a default is written in exactly one place.

/// Emit `pub struct $name` with public fields and a `Default` impl from a table of
/// `/// docs  field: Type = default` entries.
macro_rules! options_struct {
    (
        $(#[doc = $struct_doc:tt])*
        struct $name:ident {
            $( $(#[doc = $doc:tt])* $field:ident : $ty:ty = $default:tt ),* $(,)?
        }
    ) => {
        $(#[doc = $struct_doc])*
        #[derive(Clone, Debug, PartialEq)]
        pub struct $name {
            $( $(#[doc = $doc])* pub $field: $ty, )*
        }

        impl Default for $name {
            /// Every field at the default its table gives.
            fn default() -> Self {
                $name { $( $field: $default, )* }
            }
        }
    };
}
