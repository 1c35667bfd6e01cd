// How a routed command runs in the sandbox (as the agent user, argv only: the
// command is never parsed by a shell on this computer): the working tree's
// changes first, the stages' environment (proxy settings, placeholders) when
// there is one, then the model's shell line in the folder the last routed
// command of the same agent ended in. Claude Code's own Bash tool keeps the
// shell's folder from one call to the next; a `cd` in a routed command happens
// in the sandbox, so the sandbox keeps it: a file in the agent's home, one per
// session or subagent, written when the command's shell exits. A folder that
// is gone or outside the repository goes back to the session's folder, and the
// command's stderr says so, as Claude Code says "Shell cwd was reset".
import { shellQuote } from '../../common/shell-quote.js';
import { GUEST_REPO_DIR } from '../guest/guest-shell.js';
import { GUEST_UNTAR } from './working-tree-sync.js';

/**
 * Whose folder a routed command keeps: the session's, or one subagent's (ids are checked by the
 * hooks); none for Codex, whose shell tool starts every command afresh in the turn's folder.
 */
export function routedFolderKey(agentId: string | undefined, agent: 'codex' | undefined): string {
  if (agent === 'codex') return '';
  return agentId ? `agent-${agentId}` : 'session';
}

/**
 * The script. Its arguments: the session's folder, the command, 1 when the
 * working tree's files come on stdin, the folder key (routedFolderKey; empty
 * when every command starts in the session's folder), then paths to remove.
 * `repoDir` is a parameter for its test.
 */
export function routedScript(repoDir: string = GUEST_REPO_DIR): string {
  const repo = shellQuote(repoDir);
  // The command's own shell: $0 the folder file, $1 the command; it sees no arguments and $0 "bash", as with `bash -c`.
  const inner = [
    '__factory_folder=$0; __factory_command=$1; set --; BASH_ARGV0=bash',
    'trap \'pwd -P >| "$__factory_folder" 2>/dev/null\' EXIT',
    'eval "$__factory_command"',
  ].join('\n');
  return [
    'd=$1; c=$2; carry=$3; key=$4; shift 4',
    `if [ $# -gt 0 ]; then (cd ${repo} && rm -f -- "$@") || { echo "FACTORY_SYNC_FAILED removing files" >&2; exit 125; }; fi`,
    `if [ "$carry" = 1 ]; then (cd ${repo} && ${GUEST_UNTAR}) || { echo "FACTORY_SYNC_FAILED unpacking files" >&2; exit 125; }; fi`,
    'if [ -r /work/.factory/env.sh ]; then set -a; . /work/.factory/env.sh; set +a; fi',
    `cd -- "$d" 2>/dev/null || cd ${repo}`,
    `top=$(cd ${repo} && pwd -P)`,
    'folder=/dev/null',
    'if [ -n "$key" ]; then folder="${HOME:-/tmp}/.factory-routed-folder-$key"; fi',
    // Empty key: /dev/null, never -s, and the command's folder is written nowhere.
    'if [ -s "$folder" ]; then',
    '  last=$(cat -- "$folder")',
    '  case "$last" in',
    '    "$top"|"$top"/*) if [ -d "$last" ]; then cd -- "$last"; else echo "factory: the shell\'s folder was reset to $(pwd) ($last is gone)" >&2; fi ;;',
    '    *) echo "factory: the shell\'s folder was reset to $(pwd) ($last is outside the repository)" >&2 ;;',
    '  esac',
    'fi',
    `exec bash -c ${shellQuote(inner)} "$folder" "$c" </dev/null`,
  ].join('\n');
}

