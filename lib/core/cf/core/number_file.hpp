#pragma once
// Plain-text number files (alpha schedules, kernels, influence profiles): the format researchers
// write by hand or with numpy.savetxt. One reader, so every tool accepts the same syntax and
// reports a malformed file the same way (exit 2 naming file, line and token).
#include <string>
#include <vector>

namespace cf {

/// Rows of finite numbers from a text file. '#' starts a comment; ',', ';', tabs and spaces
/// separate numbers; lines with no numbers are skipped. `what` names the file's role in errors
/// ("kernel file"). Throws cf::InvalidArgument if the file cannot be opened or a token is not a
/// finite number (NaN, inf, "1.0x").
std::vector<std::vector<double>> read_number_rows(const std::string& path, const std::string& what);

}  // namespace cf
