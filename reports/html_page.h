// The page frame every HTML output shares: the head with the stylesheet, and the tail that
// embeds the source JSON (html_renderer.cpp).
#pragma once

#include <string>

namespace dtplan::reports {

void html_head(std::string& o, const std::string& title);
void html_tail(std::string& o, const std::string& json);

}  // namespace dtplan::reports
