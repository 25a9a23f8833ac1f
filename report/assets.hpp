#pragma once
// The files a report page inlines, so that it opens with no network access: Chart.js (Debian's
// libjs-chart.js, read into the binary at build time) and the page's own script and style
// (report/assets/). Defined in a source that CMake generates (embed_assets.cmake).
#include <string_view>

namespace recmix::report::assets {

std::string_view chart_js();    // Chart.js 3.9.1, minified
std::string_view report_js();   // draws the page's charts from its JSON data
std::string_view report_css();  // the page's style

}  // namespace recmix::report::assets
