//! Compiling a chat template: minijinja's parser and code generator with Hugging Face's
//! whitespace settings, number literals kept out of constant folding
//! ([`unfold_constants`]), and every instruction that can grow a value checked
//! ([`guard::guard_instructions`]).

use super::guard;
use minijinja::machinery::{parse, CodeGenerator, Instructions, WhitespaceConfig};
use minijinja::syntax::SyntaxConfig;
use minijinja::{Error, ErrorKind};
use std::collections::BTreeMap;

/// The name compiled templates carry in error messages.
const TEMPLATE_NAME: &str = "chat_template";

/// HF's whitespace settings: trim_blocks, lstrip_blocks, no trailing newline kept.
const WHITESPACE: WhitespaceConfig = WhitespaceConfig {
    keep_trailing_newline: false,
    lstrip_blocks: true,
    trim_blocks: true,
};

/// A compiled template: its instructions and those of its blocks.
pub(crate) type Compiled<'s> = (Instructions<'s>, BTreeMap<&'s str, Instructions<'s>>);

/// Compile `source` (HF's whitespace settings) with every instruction that can grow a value
/// checked (see [`super::guard`]). Syntax errors are errors.
pub(crate) fn compile(source: &str) -> Result<Compiled<'_>, Error> {
    let ast = parse(source, TEMPLATE_NAME, SyntaxConfig, WHITESPACE)?;
    let mut generator = CodeGenerator::new(TEMPLATE_NAME, source);
    generator.compile_stmt(&ast);
    let (instructions, blocks) = generator.finish();
    let blocks = blocks
        .iter()
        .map(|(name, block)| (*name, guard::guard_instructions(block)))
        .collect();
    Ok((guard::guard_instructions(&instructions), blocks))
}

/// `source` with every number literal in an expression wrapped in a filter (`(3|int)`), so the
/// compiler folds no arithmetic on constants: minijinja evaluates constant expressions while
/// compiling, where no check runs (`'x' * 99999999` would be built at load time). Attribute
/// indexes (`foo.0`) stay as they are. Values are unchanged: `int` and `float` of a number
/// literal are that number. transformers' `{% generation %}` tags become `{% if true %}`
/// (minijinja does not know them; transformers renders their body as it is).
pub(crate) fn unfold_constants(source: &str) -> Result<String, Error> {
    use minijinja::machinery::{tokenize, Token};
    let mut out = String::with_capacity(source.len() + source.len() / 4);
    let mut copied = 0usize;
    let mut previous = Token::TemplateData("");
    for token in tokenize(source, false, SyntaxConfig, WHITESPACE) {
        let (token, span) = token?;
        let after_dot = matches!(previous, Token::Dot);
        let tag_name = matches!(previous, Token::BlockStart);
        let replacement = match token {
            Token::Int(_) | Token::Int128(_) if !after_dot => Some(("(", "|int)")),
            Token::Float(_) if !after_dot => Some(("(", "|float)")),
            _ => None,
        };
        // transformers' `{% generation %}` block (assistant-mask tracking) renders its body.
        let tag = match token {
            Token::Ident("generation") if tag_name => Some("if true"),
            Token::Ident("endgeneration") if tag_name => Some("endif"),
            _ => None,
        };
        previous = token;
        if replacement.is_none() && tag.is_none() {
            continue;
        }
        let (start, end) = (span.start_offset as usize, span.end_offset as usize);
        let (Some(before), Some(text)) = (source.get(copied..start), source.get(start..end)) else {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                "template token outside its source",
            ));
        };
        out.push_str(before);
        match (replacement, tag) {
            (Some((open, close)), _) => {
                out.push_str(open);
                out.push_str(text);
                out.push_str(close);
            }
            (None, Some(tag)) => out.push_str(tag),
            (None, None) => {}
        }
        copied = end;
    }
    out.push_str(source.get(copied..).unwrap_or_default());
    Ok(out)
}
