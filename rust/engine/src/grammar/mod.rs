//! Constrained generation: llama.cpp's GBNF grammars and JSON schemas.
//!
//! - [`Grammar::parse`] reads GBNF into rules (typed errors naming line:column).
//! - [`Matcher`] follows text through a grammar over Unicode code points (pushdown stacks),
//!   byte by byte so token pieces that split a UTF-8 sequence are handled.
//! - [`Constraint`] applies a grammar while sampling (sample, check, mask only on rejection).
//! - [`schema_to_gbnf`] converts a JSON schema (or `json_object` mode) into GBNF.

mod constrain;
mod matcher;
mod parse;
mod pattern;
mod range;
mod schema;

pub use constrain::{Constraint, GrammarRequest, Step, TokenTable};
pub use matcher::Matcher;
pub use parse::Grammar;
pub use schema::{json_object_gbnf, schema_to_gbnf};
