/* The built-in chat formats. Each renders what the named family's own
 * template renders for plain system/user/assistant conversations (the test
 * test_chat_formats compares them with the real templates in
 * ../shared/golden/chat where the family is there). */
#include "chat_formats.h"

#include <string.h>

static const wisp_chat_format formats[] = {
    {"chatml",
     "{%- for m in messages -%}\n"
     "{{- '<|im_start|>' ~ m.role ~ '\\n' ~ m.content ~ '<|im_end|>\\n' -}}\n"
     "{%- endfor -%}\n"
     "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}",
     "<|im_start|>role\\n...<|im_end|> (Qwen, SmolLM2 and many others)"},
    {"llama3",
     "{{- bos_token if bos_token is defined else '' -}}\n"
     "{%- for m in messages -%}\n"
     "{{- '<|start_header_id|>' ~ m.role ~ '<|end_header_id|>\\n\\n' ~ (m.content | trim) ~ '<|eot_id|>' -}}\n"
     "{%- endfor -%}\n"
     "{%- if add_generation_prompt -%}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}{%- endif -%}",
     "Llama 3 headers, <|eot_id|> after each turn (no date block)"},
    {"gemma",
     "{{- bos_token if bos_token is defined else '' -}}\n"
     "{%- set prefix = '' -%}\n"
     "{%- set turns = messages -%}\n"
     "{%- if messages and messages[0].role == 'system' -%}\n"
     "  {%- set prefix = messages[0].content ~ '\\n\\n' -%}\n"
     "  {%- set turns = messages[1:] -%}\n"
     "{%- endif -%}\n"
     "{%- for m in turns -%}\n"
     "  {%- if (m.role == 'user') != loop.index0 is even -%}\n"
     "    {{- raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') -}}\n"
     "  {%- endif -%}\n"
     "  {{- '<start_of_turn>' ~ ('model' if m.role == 'assistant' else m.role) ~ '\\n' -}}\n"
     "  {{- (prefix if loop.first else '') ~ (m.content | trim) ~ '<end_of_turn>\\n' -}}\n"
     "{%- endfor -%}\n"
     "{%- if add_generation_prompt -%}{{- '<start_of_turn>model\\n' -}}{%- endif -%}",
     "<start_of_turn>user/model; a system message joins the first user turn (Gemma 2 and 3)"},
    {"phi3",
     "{%- for m in messages -%}\n"
     "  {%- if m.role in ['system', 'user', 'assistant'] -%}\n"
     "    {{- '<|' ~ m.role ~ '|>\\n' ~ m.content ~ '<|end|>\\n' -}}\n"
     "  {%- endif -%}\n"
     "{%- endfor -%}\n"
     "{%- if add_generation_prompt -%}{{- '<|assistant|>\\n' -}}\n"
     "{%- else -%}{{- eos_token if eos_token is defined else '' -}}{%- endif -%}",
     "<|user|>\\n...<|end|> (Phi-3, Phi-3.5)"},
    {"phi4",
     "{%- for m in messages -%}\n"
     "  {%- if m.role in ['system', 'user', 'assistant'] -%}\n"
     "    {{- '<|im_start|>' ~ m.role ~ '<|im_sep|>' ~ m.content ~ '<|im_end|>' -}}\n"
     "  {%- endif -%}\n"
     "{%- endfor -%}\n"
     "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant<|im_sep|>' -}}{%- endif -%}",
     "<|im_start|>role<|im_sep|>...<|im_end|> (Phi-4)"},
    {"zephyr",
     "{%- set end = eos_token if eos_token is defined else '</s>' -%}\n"
     "{%- for m in messages -%}\n"
     "  {%- if m.role in ['system', 'user', 'assistant'] -%}\n"
     "    {{- '<|' ~ m.role ~ '|>\\n' ~ m.content ~ end ~ '\\n' -}}\n"
     "  {%- endif -%}\n"
     "  {%- if loop.last and add_generation_prompt -%}{{- '<|assistant|>\\n' -}}{%- endif -%}\n"
     "{%- endfor -%}",
     "<|user|>\\n...</s> (Zephyr, TinyLlama-Chat)"},
    {"mistral",
     "{%- set has_system = messages and messages[0].role == 'system' -%}\n"
     "{%- set turns = messages[1:] if has_system else messages -%}\n"
     "{%- for m in turns -%}\n"
     "  {%- if (m.role == 'user') != loop.index0 is even -%}\n"
     "    {{- raise_exception('After the optional system message, conversation roles must alternate "
     "user/assistant/user/assistant/...') -}}\n"
     "  {%- endif -%}\n"
     "{%- endfor -%}\n"
     "{{- bos_token if bos_token is defined else '' -}}\n"
     "{%- for m in turns -%}\n"
     "  {%- if m.role == 'user' -%}\n"
     "    {%- set system = messages[0].content ~ '\\n\\n' if loop.last and has_system else '' -%}\n"
     "    {{- '[INST] ' ~ system ~ m.content ~ '[/INST]' -}}\n"
     "  {%- else -%}\n"
     "    {{- ' ' ~ (m.content | trim) ~ (eos_token if eos_token is defined else '</s>') -}}\n"
     "  {%- endif -%}\n"
     "{%- endfor -%}",
     "[INST] ...[/INST] answer</s>, system text before the last user turn (Mistral v3 tokenizer)"},
};

const wisp_chat_format *wisp_chat_format_find(const char *name) {
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++)
        if (strcmp(formats[i].name, name) == 0) return &formats[i];
    return NULL;
}

const wisp_chat_format *wisp_chat_formats(size_t *count) {
    *count = sizeof formats / sizeof formats[0];
    return formats;
}
