#include "data/criteo_parser.hpp"
