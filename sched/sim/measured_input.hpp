#pragma once
// The measured pair files given to the simulator (`recmix sim --pairs FILE`, several allowed,
// written by `recmix pairs`): merged, their type names mapped onto the simulator's job types,
// and turned into the ground truth's pair data, measured profiles and the interference model's
// observations (workload.hpp's add_measured_pairs loads them into a SimEnvironment).
//
// Mapping of a measured type name (a recmix job's name up to its first '.'):
//  1. an alias given with --pairs-type NAME=TYPE (NAME=NAME: a measured name that is no simulator
//     type was registered as a type of its own with its measured profile, by add_measured_pairs);
//  2. else the name itself when it is a job type of the simulator (a DLRM preset such as
//     "dlrm-small", or a profiled type of the Lucid / Gavel data);
//  3. else "dlrm-" + name when that is a DLRM preset ("small" from jobs small.1, small.2 is
//     dlrm-small);
//  4. else it is unknown: a warning names it and its files, and its lines are left out.
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "sched/measured_pairs.hpp"
#include "sched/pair_data.hpp"
#include "sched/utilisation.hpp"

namespace recmix::sched {

// Several pair files as one. A pair (type, other) that two files give with different slowdowns
// is a DataError naming both files and both values (the same value twice is kept once); a type's
// solo lines from several files are averaged, weighted by their samples.
struct MergedPairs {
  MeasuredPairs pairs;
  std::map<std::string, std::vector<std::string>> files_of_type;  // type name -> files naming it
};
MergedPairs read_pairs_files(const std::vector<std::string>& paths);

// "NAME=TYPE" arguments as a map; ConfigError on a malformed one or a NAME given twice.
std::map<std::string, std::string> parse_type_aliases(const std::vector<std::string>& args);

// A type's profile measured alone: used instead of the roofline (DLRM presets) or the public
// profile for the utilisation vector and the solo step time.
struct MeasuredProfile {
  UtilisationVector util;
  double solo_step_s = 0;
};

struct MeasuredInput {
  std::vector<std::string> files;
  std::map<std::string, std::string> mapping;           // measured name -> simulator type
  std::vector<std::string> warnings;                    // unknown names, unused aliases
  std::map<std::string, MeasuredProfile> profiles;      // by simulator type, lines with parts
  PairDataset dataset;  // source "measured", simulator type names, mapped pairs only
  bool empty() const { return files.empty(); }
};

// Maps `merged` onto the simulator's types (`is_sim_type` says which names are). ConfigError
// when an alias names no simulator type, or two measured names map to the same type.
MeasuredInput map_measured_pairs(const MergedPairs& merged, const std::vector<std::string>& files,
                                 const std::function<bool(const std::string&)>& is_sim_type,
                                 const std::map<std::string, std::string>& aliases);

}  // namespace recmix::sched
