// The one registry of error names the app raises on purpose. The host names an
// error (FactoryError's name is typed by this table, so an unknown name does not
// compile); the UI shows its title and help instead of the internal name. A name
// that comes from elsewhere (an older host, a wire error) still shows, with a
// generic title. test/unit/common/errors.test.ts checks that every name used in
// the sources is here.

export interface ErrorHelp {
  /** A short human heading, e.g. "The sandbox did not start". */
  title: string;
  /** What happened and what to do, in a sentence or two. */
  help: string;
}

export const ERRORS = {
  // Input and the API
  InvalidInput: { title: 'Invalid input', help: 'A value sent to the app was refused; the message names the field. Correct it and try again.' },
  InvalidData: { title: 'Invalid data', help: 'Data the app read did not have the expected shape. The message names the first problem.' },
  UnknownMethod: { title: 'Unknown request', help: 'The app does not offer this request. The window and the app may be of different versions: reload the window.' },
  Unauthorized: { title: 'Not authorised', help: 'The address is missing the token or has a wrong one. Open the exact address the app printed at start.' },
  Forbidden: { title: 'Not allowed', help: 'Requests are accepted only from the app\'s own window.' },
  NotFound: { title: 'Not found', help: 'What was asked for does not exist (any more). Reload the list and try again.' },
  Disconnected: { title: 'Disconnected from the app', help: 'The connection to the app was lost. Check that the app still runs, then reload the window.' },
  ShuttingDown: { title: 'The app is shutting down', help: 'The app is stopping and takes no new requests. Start it again to go on.' },
  Error: { title: 'Something went wrong', help: 'An unexpected error. The message says what failed; the app log in the data folder may say more.' },
  DiskFull: { title: 'The disk is full', help: 'A disk the app writes to has no space left; the message names the folder. Free space there (old task logs, tasks you no longer need, other files), then try again.' },

  // The host repository
  NotAGitRepository: { title: 'Not a git repository', help: 'The folder is not the top of a git repository (or no longer exists). Choose the repository\'s top folder.' },
  EmptyRepository: { title: 'The repository has no commits', help: 'A task starts from a commit. Make a first commit in the repository, then start the task.' },
  InvalidBaseRef: { title: 'Base ref not found', help: 'The branch, tag or commit to start from does not exist in the repository. Choose another base ref.' },
  RepoTooLarge: { title: 'Repository too large', help: 'The bundle of the repository is over the size a sandbox accepts (2 GiB). Start from a smaller repository or base.' },
  BranchExists: { title: 'The branch already exists', help: 'Approving would overwrite an existing branch, which the app never does. Delete or rename that branch in your repository, then approve again.' },
  GitFailed: { title: 'Git failed', help: 'A git command on this computer failed; the message shows git\'s own words. Check the repository with git, then retry.' },
  GitUnavailable: { title: 'A needed tool is missing', help: 'Git on this computer cannot be run safely without the tool named in the message. Install it, then retry.' },
  GitLimitExceeded: { title: 'Git went over its limits', help: 'Git was stopped because it used more memory, time or output than the app allows for this work. The data is too large or built to be costly.' },

  // Tasks and their life
  TaskNotFound: { title: 'Task not found', help: 'No task has this id; it may have been removed. Reload the task list.' },
  InvalidTransition: { title: 'Not possible in this state', help: 'The task cannot do this in its current phase. Wait for it to finish or cancel it first.' },
  TaskActive: { title: 'The task is still running', help: 'A running task cannot be removed. Cancel it (or wait for it to finish), then remove it.' },
  NotRetryable: { title: 'Cannot retry this task', help: 'Only a failed, cancelled or interrupted task can be retried.' },
  Cancelled: { title: 'The work was cancelled', help: 'The work was cancelled on request. Retry the task to run it again.' },
  Interrupted: { title: 'Interrupted by an app stop', help: 'The app stopped while the task ran. Retry runs it again in a fresh sandbox from the stage that was cut.' },
  UnknownAgent: { title: 'Unknown agent', help: 'No agent of that name is available. Choose one from the list in the new task form or the settings.' },
  AgentCredentialMissing: { title: 'The agent has no credential', help: 'The chosen agent signs in to its model provider with a credential stored in this app, and none is. Add one in Credentials, or choose the Command agent.' },
  CorruptState: { title: 'Saved state is damaged', help: 'A file the app saved could not be read back. The message names it; the task may need to be destroyed and started again.' },

  // QEMU, the image and the sandbox
  QemuMissing: { title: 'QEMU is not installed', help: 'Sandboxes run under QEMU. Install qemu-system and qemu-utils with your package manager (the message has the exact hint), then try again.' },
  ImageBuildFailed: { title: 'The base image could not be built', help: 'Building the sandbox base image failed at the step named in the message; its last output is below. Fix the cause (disk space, missing packages), then build again.' },
  SandboxBootFailed: { title: 'The sandbox did not start', help: 'QEMU ended before the sandbox answered. The serial console below shows how far it got.' },
  SandboxBootTimeout: { title: 'The sandbox did not start in time', help: 'The sandbox did not answer SSH in time and was stopped. Under software emulation boots are slower: retry, or raise the boot timeout.' },
  HostKeyMismatch: { title: 'Sandbox identity mismatch', help: 'The sandbox presented an SSH host key other than the one pinned for it, so the app refused to connect. Destroy the sandbox and start again.' },
  RemoteHostKeyUnknown: { title: 'Sandbox host not trusted yet', help: 'The sandbox host presented an SSH host key that is not pinned. Compare the fingerprint in the message with the one on the host (ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub) and pin it in Settings.' },
  RemoteHostKeyChanged: { title: 'Sandbox host key changed', help: 'The sandbox host presented an SSH host key other than the pinned one: the host was reinstalled, or someone is intercepting the connection. Find out which before you pin the new key.' },
  RemoteHostUnreachable: { title: 'Sandbox host unreachable', help: 'The app could not open an SSH connection to the sandbox host. Check its address, port, key and that sshd runs there.' },
  RemoteHostLost: { title: 'Sandbox host connection lost', help: 'The SSH connection to the sandbox host dropped. Its tasks are shown as lost; once the host is back, whatever of them is left there is removed.' },
  RemoteCommandFailed: { title: 'Sandbox host command failed', help: 'A command the app ran on the sandbox host (libvirt, qemu-img, a file operation) failed. The message names it and its last error lines.' },
  RemoteHostSetup: { title: 'Sandbox host not ready', help: 'The sandbox host lacks something sandboxes need there (libvirt, QEMU, socat, the storage folder). The message names it.' },
  NoSandbox: { title: 'No running sandbox', help: 'This needs the task\'s sandbox running, and it is not. Destroy the task\'s sandbox to retry in a fresh one.' },
  SandboxStopped: { title: 'The sandbox has stopped', help: 'The sandbox\'s VM is no longer running. Retry the task to run it in a fresh sandbox.' },
  SandboxError: { title: 'Sandbox operation failed', help: 'A file could not be written inside the sandbox. The message gives the path and the reason.' },
  SeedFailed: { title: 'The repository could not be copied in', help: 'Cloning the task\'s repository inside the sandbox failed; the message shows why. Retry; if it fails again, start a new task.' },
  SeedMissing: { title: 'The task\'s copy of the repository is gone', help: 'The bundle the task started from is missing or unreadable, so it cannot run again. Start a new task.' },
  GuestCommandTimeout: { title: 'A sandbox command took too long', help: 'A command in the sandbox did not finish in time and was stopped. The sandbox may be overloaded; retry.' },
  GuestFileRefused: { title: 'File refused', help: 'A file the sandbox offered is not a regular file, so the app did not read it.' },
  GuestFileTooLarge: { title: 'File too large', help: 'A file from the sandbox is larger than the app accepts, so it was not read.' },

  // Pipeline
  InvalidPipelineConfig: { title: 'Invalid pipeline config', help: 'The repository\'s .factory/pipeline.json (at the base commit) could not be used; the message names the problem. Fix it in the repository and start a new task.' },
  PipelineError: { title: 'The pipeline failed', help: 'The pipeline left the repository in the sandbox in a state the app cannot bring back (wrong branch, failed commit). The message says which.' },
  StageFailed: { title: 'A stage failed', help: 'A pipeline stage ended with an error. Its terminal log shows what happened; fix the cause and retry from that stage.' },

  // Environments
  SetupFailed: { title: 'Setting up the sandbox failed', help: 'A setup step (Debian packages, Node, the project\'s install) failed; the message names the step and its last lines are below. Fix the repository\'s environment config, or allow a refused destination, and start again.' },
  RegistryUnavailable: { title: 'The package registry did not answer', help: 'The app asks the npm registry which Node version to install before a task starts. Check the network and try again.' },
  LayerInUse: { title: 'The cached environment is in use', help: 'A running sandbox was started on this cached environment. Destroy that sandbox first, then delete it.' },

  // Pull-back and review
  PullbackFailed: { title: 'The work could not be brought back', help: 'Bundling the task\'s branch inside the sandbox failed; the output is below. Retry the task.' },
  PullbackRejected: { title: 'The returned work was refused', help: 'What came back from the sandbox failed a safety check (size, refs, objects) and was not applied. The message names the check.' },
  NoReview: { title: 'No review to show', help: 'The task has no returned work to review yet, or it was already decided.' },
  NotInReview: { title: 'The task is not in review', help: 'Approve and Reject need a task waiting for review.' },
  NothingToApprove: { title: 'Nothing to approve', help: 'The task\'s branch came back identical to its base commit: there are no changes to bring in.' },
  ApproveNeedsConfirmation: { title: 'Approval needs a second step', help: 'The review found things to confirm first (listed in the message). Look at them and confirm to approve.' },
  ApproveFailed: { title: 'Approval failed', help: 'Bringing the approved branch into your repository failed; your repository was not changed. The message shows git\'s reason.' },
  ReviewFileFailed: { title: 'The file\'s changes could not be shown', help: 'Computing the patch of this file failed or went over a limit. The rest of the review is unaffected.' },

  // Credentials
  KeychainUnavailable: { title: 'The keychain cannot be used', help: 'The OS keychain is missing or locked, and the app never stores credentials anywhere else. Unlock or start the keychain, then retry.' },
  CredentialMissing: { title: 'Credential value missing', help: 'The keychain has no value for this credential (removed outside the app?). Set it again on the Credentials screen.' },
  CredentialValueRequired: { title: 'Enter the credential\'s value again', help: 'Changing where a credential is sent needs its value entered again, so a stored key cannot be redirected without it.' },
  CredentialScope: { title: 'Credential does not cover this remote', help: 'The git credential is for another host or path than the task\'s remote. Use a credential made for this remote.' },
  InvalidCredential: { title: 'Invalid credential settings', help: 'The credential\'s settings are incomplete or inconsistent; the message names the problem. Edit it on the Credentials screen.' },
  DestinationRefused: { title: 'Destination refused', help: 'The credential proxy refused a destination (private, loopback or unresolvable address).' },
  InvalidPath: { title: 'Invalid path', help: 'A path the app was given has characters or a form it refuses; the message says which.' },

  // Terminals
  UnknownTerminal: { title: 'Terminal not found', help: 'No terminal session has this id; it may have been closed or removed. Reopen it from the task.' },
  TerminalClosed: { title: 'The terminal has ended', help: 'The terminal\'s process exited or lost its connection, so it takes no more input. Open a new one.' },
  TerminalLive: { title: 'The terminal is still running', help: 'A running terminal cannot be removed. Close it first.' },
  TerminalServiceDisposed: { title: 'Terminals are shutting down', help: 'The app is stopping and opens no new terminals.' },

  // The factory CLI and its socket (issue 11)
  Usage: { title: 'Wrong usage', help: 'The command line was not understood; the message says what. Run factory --help, or factory <command> --help.' },
  DataDirInUse: { title: 'The app is already running', help: 'Another Factory in a Box app uses this data folder (its pid is in the message). Use that one, or stop it first.' },
  AppNotRunning: { title: 'The app is not running', help: 'Start it (the desktop app or npm start), or leave out --no-start so the CLI starts it in the background.' },
  EgressNotApproved: { title: 'The repository asks for more network', help: 'The repository\'s environment asks its sandbox to reach destinations you have not allowed always for it; the message names them. Nothing was started. Run again naming each with --allow-egress (the message shows the flags) to let this task reach them, or start the task in the app and allow each one.' },
  QuitUnsupported: { title: 'This app is ended from its window', help: 'factory quit ends an app the CLI or npm start started; the desktop app is closed from its window or tray.' },
  AppStartFailed: { title: 'The app did not start', help: 'Its log (the last lines are above, the file is in the data folder\'s logs) says why. Fix the cause and run the command again.' },

  // Claude Code session hooks (issue 11)
  HookSettingsInvalid: { title: 'Claude Code settings not understood', help: 'The settings.json named in the message is not valid JSON, or its "hooks" are not in Claude Code\'s shape, so it was not changed. Fix the file, then run the command again.' },
  HookSettingsOutside: { title: 'Claude Code settings lead outside the repository', help: 'The repository\'s .claude folder or its settings.json is a symlink to a place outside the repository (the message names both), so nothing was written: a repository must not get factory to change files elsewhere. Replace the symlink with a real folder or file, or use --user, then run the command again.' },
  HookInputInvalid: { title: 'Unexpected hook input', help: 'The hook did not receive the JSON Claude Code sends on standard input (session_id, cwd). Run it only from Claude Code\'s hooks (factory hooks install).' },
  HookTimeout: { title: 'The session hook had no answer in time', help: 'The app did not answer the hook before Claude Code\'s time limit, so the leak check did not complete and the sandbox was not destroyed. See the app (or factory ls) for the session\'s sandbox and check it with factory leakcheck.' },
  SessionNotFound: { title: 'No sandbox for this session', help: 'The app has no sandbox recorded for this Claude Code session (it ended, or was reaped after the session\'s process went away). A new session gets a new one.' },
  SyncTooLarge: { title: 'Too much to carry into the sandbox', help: 'Before each routed command the working tree\'s changes go into the session\'s sandbox, within a limit; the message names the largest files. Add generated files to .gitignore, or commit them, and run the command again.' },
  SyncFailed: { title: 'The working tree did not reach the sandbox', help: 'Carrying the working tree\'s changes into the session\'s sandbox failed (the message has the reason), so the command did not run. Check that the sandbox still runs (factory ls) and try again.' },

  // The next step after Approve (main/git/branch-actions.ts)
  NotApproved: { title: 'The task is not approved', help: 'Checking out, pushing or opening the branch needs a task whose result you approved.' },
  InvalidRefName: { title: 'Refused branch or remote name', help: 'A branch or remote name from the repository is not a valid git name, or starts with a dash. The message names it; rename it in the repository.' },
  WorkTreeDirty: { title: 'Uncommitted changes in your repository', help: 'Checking out another branch could mix them in or lose them. Commit or stash the files named in the message, then check out again.' },
  PushFailed: { title: 'Push failed', help: 'Your git could not push the branch; git\'s own output is below. Check the remote and your credentials with git, then push again.' },
  EditorFailed: { title: 'The editor did not start', help: 'The editor command (setting editorCommand, default "code") could not be run. Install it or set editorCommand to the program to run.' },
  // Internal protocols
  QmpError: { title: 'VM control failed', help: 'QEMU refused a control command (QMP). The message has QEMU\'s reason.' },
} as const satisfies Record<string, ErrorHelp>;

export type ErrorName = keyof typeof ERRORS;

export function isErrorName(name: string): name is ErrorName {
  return Object.prototype.hasOwnProperty.call(ERRORS, name);
}

/** The title and help the UI shows for an error name; a name not in the registry gets the generic ones. */
export function errorHelp(name: string): ErrorHelp {
  return isErrorName(name) ? ERRORS[name] : ERRORS.Error;
}

/**
 * An error the app raises on purpose: its name is one of the registry's (the UI
 * shows its title and help), so an unknown name does not compile.
 */
export class FactoryError extends Error {
  constructor(
    name: ErrorName,
    message: string,
    public readonly detail?: string,
  ) {
    super(message);
    this.name = name;
  }

  /** An error that crossed from elsewhere (the wire) keeps its name even when the registry does not know it. */
  static carried(name: string, message: string, detail?: string): FactoryError {
    const err = new FactoryError('Error', message, detail);
    err.name = name;
    return err;
  }
}

/** An error as it crosses the API's wire (socket, web host, IPC). */
export interface WireError {
  error: { name: string; message: string; detail?: string };
}

export function fromWireError(wire: WireError): FactoryError {
  return FactoryError.carried(wire.error.name, wire.error.message, wire.error.detail);
}
