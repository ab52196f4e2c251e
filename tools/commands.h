/* Subcommands of the lcextend program. Each gets argv[0] = its name and returns the exit code
 * (0 ok, 1 failure, 2 usage error). */
#ifndef LCX_TOOLS_COMMANDS_H
#define LCX_TOOLS_COMMANDS_H

int lcx_cmd_inspect(int argc, char **argv);
int lcx_cmd_score(int argc, char **argv);
int lcx_cmd_train_steps(int argc, char **argv);
int lcx_cmd_plan(int argc, char **argv);
int lcx_cmd_tokenize(int argc, char **argv);
int lcx_cmd_import(int argc, char **argv);
int lcx_cmd_export(int argc, char **argv);
int lcx_cmd_reshard(int argc, char **argv);
int lcx_cmd_verify(int argc, char **argv);
int lcx_cmd_eval(int argc, char **argv);
int lcx_cmd_train(int argc, char **argv);
/* lcextend CKPT --to N: argv[0] is CKPT */
int lcx_cmd_extend(int argc, char **argv);
int lcx_cmd_rope(int argc, char **argv);

#endif
