// Strict JSON for files named *.json: yaml-cpp reads JSON as YAML 1.2, which also accepts what
// JSON does not (a trailing comma, a comment, an unquoted key, single quotes), so a config.json
// that Python's json module and Hugging Face's loader refuse would pass. The check parses the
// text as JSON (RFC 8259) without building a document and names the first offence.
#pragma once

#include <string>

namespace dtplan {

// Throws InputError at the file's line:column with the reason when `text` is not JSON.
void check_strict_json(const std::string& text, const std::string& path);

}  // namespace dtplan
