//! The emitter for option tables (e.g. [`crate::sampling_params_table`]): a table lists each
//! field once with its documentation and default, and this macro turns it into the public
//! struct and its `Default` impl. The FFI crate turns the same tables into UniFFI record
//! declarations, so a default is written in exactly one place.

/// An option table's default as a Rust value: `[]` (an empty list, as UniFFI writes it) is an
/// empty `Vec`; anything else is itself.
macro_rules! option_default {
    ([]) => {
        Vec::new()
    };
    ($value:tt) => {
        $value
    };
}

/// Turns a table default into its field's type: itself, or a string literal into a `String`.
pub(crate) trait IntoOption<T> {
    /// The field value.
    fn into_option(self) -> T;
}

impl<T> IntoOption<T> for T {
    fn into_option(self) -> T {
        self
    }
}

impl IntoOption<String> for &str {
    fn into_option(self) -> String {
        self.to_string()
    }
}

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
                $name {
                    $( $field: $crate::macros::IntoOption::<$ty>::into_option(
                        option_default!($default)
                    ), )*
                }
            }
        }
    };
}
