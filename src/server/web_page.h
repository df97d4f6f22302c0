// The web page served at / (src/server/web/index.html, embedded at build time
// by cmake/embed_file.cmake): chat with streaming, speculation shown token by
// token. A single self-contained HTML file.
#pragma once
#include <string_view>

namespace tandem::server {

std::string_view web_page_html();

}  // namespace tandem::server
