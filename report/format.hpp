#pragma once
// Figures as every table of a report prints them: as people read them, not as a double reads
// back. The units go in the column header ("start (s)") or, for bytes, in the value ("2.23 MiB").
#include <string>

namespace recmix::report {

// Six significant digits at most, never an exponent: "0.693147", "2338945", "0.000038097";
// a whole number as it is ("150"); "n/a" for NaN or infinity.
std::string figure(double v);
// Bytes in binary units with three significant digits: "512 B", "42.2 KiB", "2.23 MiB", "1.50 GiB".
std::string bytes(double v);
std::string integer(long long v);

}  // namespace recmix::report
