#pragma once
// Each command group registers its subcommands on the top-level app. The callback of a
// subcommand does the work and throws recmix::Error on failure; main reports it.
namespace CLI {
class App;
}

namespace recmix::cli {

void add_train_commands(CLI::App& app);  // train, eval         (train_commands.cpp)
void add_data_commands(CLI::App& app);   // data convert/synth/inspect (data_commands.cpp)
void add_sim_command(CLI::App& app);     // sim                 (sim_command.cpp)
void add_run_commands(CLI::App& app);    // run, submit, status (run_commands.cpp)
void add_pairs_command(CLI::App& app);   // pairs               (pairs_command.cpp)
void add_init_checkpoint_command(CLI::App& app);  // init-checkpoint (init_checkpoint_command.cpp)
void add_report_command(CLI::App& app);  // report              (report_command.cpp)

}  // namespace recmix::cli
