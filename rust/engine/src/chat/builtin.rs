//! Built-in chat templates for model files that carry no `tokenizer.chat_template`.

/// ChatML: `<|im_start|>{role}\n{content}<|im_end|>\n` per message, then
/// `<|im_start|>assistant\n` when a generation prompt is requested.
pub(crate) const CHATML: &str = "\
{%- for message in messages -%}
{{- '<|im_start|>' ~ message['role'] ~ '\\n' ~ message['content'] ~ '<|im_end|>\\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{- '<|im_start|>assistant\\n' -}}
{%- endif -%}
";

/// Gemma turn format: BOS, then `<start_of_turn>{role}\n{content}<end_of_turn>\n` per message
/// with role `assistant` spelled `model`; a leading system message is not a turn of its own but
/// is prepended (followed by a blank line) to the first user turn. Contents are trimmed, as
/// Gemma's reference formatting does. The generation prompt is `<start_of_turn>model\n`.
pub(crate) const GEMMA: &str = "\
{{- bos_token -}}
{%- set ns = namespace(prefix='') -%}
{%- set turns = messages -%}
{%- if messages and messages[0]['role'] == 'system' -%}
{%- set ns.prefix = (messages[0]['content'] | trim) ~ '\\n\\n' -%}
{%- set turns = messages[1:] -%}
{%- endif -%}
{%- for message in turns -%}
{%- set role = 'model' if message['role'] == 'assistant' else message['role'] -%}
{{- '<start_of_turn>' ~ role ~ '\\n' -}}
{%- if role == 'user' and ns.prefix -%}
{{- ns.prefix -}}
{%- set ns.prefix = '' -%}
{%- endif -%}
{{- (message['content'] | trim) ~ '<end_of_turn>\\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{- '<start_of_turn>model\\n' -}}
{%- endif -%}
";

/// The built-in template source for a GGUF `general.architecture` value.
pub(crate) fn source_for(architecture: &str) -> &'static str {
    match architecture {
        "gemma" | "gemma2" | "gemma3" => GEMMA,
        _ => CHATML,
    }
}
