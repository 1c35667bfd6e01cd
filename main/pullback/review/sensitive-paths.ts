// Files that make something run later: on the host (hooks, editor tasks, package
// manager config), in CI, or in this app's next sandbox. 'danger' is for what
// runs without anyone asking once the branch is checked out or pushed;
// 'warning' for what runs when the user runs a tool. Paths are matched without
// regard to case: on a case-insensitive disk `.GitHub/Workflows` is `.github/workflows`.

export interface PathRule {
  kind: 'runs-code' | 'git-config';
  severity: 'warning' | 'danger';
  pattern: RegExp;
  why: string;
}

const CI = 'CI configuration: runs on the CI service when the branch is pushed';

export const PATH_RULES: readonly PathRule[] = [
  // CI: runs when pushed.
  { kind: 'runs-code', severity: 'danger', pattern: /^\.github\/workflows\//, why: 'a GitHub Actions workflow: runs in CI when the branch is pushed' },
  { kind: 'runs-code', severity: 'danger', pattern: /^\.github\/actions\//, why: 'a local GitHub Action that workflows run' },
  { kind: 'runs-code', severity: 'danger', pattern: /^\.(gitea|forgejo)\/workflows\//, why: CI },
  { kind: 'runs-code', severity: 'danger', pattern: /^\.gitlab-ci\.ya?ml$|^\.gitlab\/ci\//, why: CI },
  { kind: 'runs-code', severity: 'danger', pattern: /^\.circleci\/|^\.travis\.ya?ml$|^\.buildkite\/|^\.drone\.ya?ml$|^\.woodpecker(\.ya?ml$|\/)/, why: CI },
  { kind: 'runs-code', severity: 'danger', pattern: /^azure-pipelines\.ya?ml$|^\.azure-pipelines\/|^bitbucket-pipelines\.ya?ml$|(^|\/)jenkinsfile$|^appveyor\.ya?ml$|^\.appveyor\.ya?ml$/, why: CI },
  // This app and coding agents on the host.
  { kind: 'runs-code', severity: 'danger', pattern: /^\.factory\//, why: "this app's pipeline config and prompts: run in the next task's sandbox" },
  { kind: 'runs-code', severity: 'danger', pattern: /(^|\/)\.claude\//, why: 'Claude Code project settings: hooks and permissions that run commands on your machine' },
  { kind: 'runs-code', severity: 'danger', pattern: /(^|\/)\.mcp\.json$/, why: 'MCP servers: commands that coding agents and editors start on your machine' },
  { kind: 'runs-code', severity: 'warning', pattern: /(^|\/)\.(cursor|codex|gemini|windsurf|continue)\//, why: 'coding agent settings for this repository' },
  // Git hooks.
  { kind: 'runs-code', severity: 'danger', pattern: /(^|\/)\.husky\//, why: 'git hooks installed by husky: run on every commit' },
  { kind: 'runs-code', severity: 'danger', pattern: /(^|\/)\.?git-?hooks\/|(^|\/)\.hooks\//, why: 'a git hook folder: runs on commit, merge or push once core.hooksPath points at it' },
  { kind: 'runs-code', severity: 'danger', pattern: /(^|\/)\.?lefthook(-local)?\.(ya?ml|json|toml)$|(^|\/)\.simple-git-hooks(\.c?js|\.json)?$|(^|\/)\.pre-commit-config\.ya?ml$/, why: 'git hook manager config: runs on commit' },
  // Editors.
  { kind: 'runs-code', severity: 'danger', pattern: /(^|\/)\.vscode\/tasks\.json$/, why: 'VS Code tasks: can run when the folder is opened' },
  { kind: 'runs-code', severity: 'danger', pattern: /(^|\/)\.vscode\/settings\.json$/, why: 'VS Code settings: can point tools (git, linters, terminals) at programs in the repository' },
  { kind: 'runs-code', severity: 'warning', pattern: /(^|\/)\.vscode\/(launch|extensions)\.json$|(^|\/)[^/]*\.code-workspace$/, why: 'VS Code launch configurations, workspace or recommended extensions' },
  { kind: 'runs-code', severity: 'warning', pattern: /(^|\/)\.idea\//, why: 'JetBrains IDE project settings (run configurations)' },
  { kind: 'runs-code', severity: 'warning', pattern: /(^|\/)\.devcontainer(\/|\.json$)/, why: 'dev container config: its commands run when the folder is opened in a container' },
  // Shells and tool managers.
  { kind: 'runs-code', severity: 'warning', pattern: /(^|\/)\.envrc$/, why: 'direnv: runs in your shell when you enter the folder (after direnv allow)' },
  { kind: 'runs-code', severity: 'warning', pattern: /(^|\/)\.tool-versions$|(^|\/)\.?mise(\.local)?\.toml$|(^|\/)\.mise\//, why: 'tool manager config: can install and run tools and hooks' },
  // Package managers and builds.
  { kind: 'runs-code', severity: 'danger', pattern: /(^|\/)\.pnpmfile\.c?js$/, why: 'pnpm hooks: run on every pnpm install' },
  { kind: 'runs-code', severity: 'danger', pattern: /(^|\/)\.yarn\/(plugins|releases)\//, why: 'code that yarn loads and runs on every command' },
  { kind: 'runs-code', severity: 'warning', pattern: /(^|\/)\.npmrc$|(^|\/)\.yarnrc(\.ya?ml)?$|(^|\/)bunfig\.toml$/, why: 'package manager settings (registry, script shell, node options, yarnPath)' },
  { kind: 'runs-code', severity: 'warning', pattern: /(^|\/)(gnu)?makefile$|\.mk$/, why: 'a Makefile: runs when you run make' },
  { kind: 'runs-code', severity: 'warning', pattern: /(^|\/)setup\.py$|(^|\/)build\.rs$|(^|\/)\.cargo\/config(\.toml)?$/, why: 'build script: runs when the package is built or installed' },
  { kind: 'runs-code', severity: 'warning', pattern: /(^|\/)gradlew(\.bat)?$|(^|\/)gradle\/wrapper\/|(^|\/)mvnw(\.cmd)?$|(^|\/)\.mvn\//, why: 'build tool wrapper: downloads and runs a build tool' },
  // Git's own behaviour.
  { kind: 'git-config', severity: 'warning', pattern: /(^|\/)\.gitattributes$/, why: 'changes how git filters, diffs, merges and checks out files (filter and diff drivers, eol, lfs)' },
  { kind: 'git-config', severity: 'warning', pattern: /(^|\/)\.?gitconfig$|\.gitconfig$|(^|\/)\.git-config$/, why: 'a git config file: meant to be included into git settings' },
  { kind: 'git-config', severity: 'warning', pattern: /(^|\/)\.lfsconfig$/, why: 'git-lfs settings: where large files are fetched from and pushed to' },
];

/** The rules a path falls under. */
export function rulesFor(path: string): PathRule[] {
  const p = path.toLowerCase();
  return PATH_RULES.filter((r) => r.pattern.test(p));
}

/** npm lifecycle scripts that run on `npm install` (of this package or of a git dependency on it). */
export const INSTALL_SCRIPTS = new Set(['preinstall', 'install', 'postinstall', 'preprepare', 'prepare', 'postprepare', 'prepack', 'postpack', 'dependencies']);
