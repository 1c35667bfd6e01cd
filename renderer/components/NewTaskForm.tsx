import { useEffect, useRef, useState, type DragEvent, type FormEvent } from 'react';
import { MAX_WAYS, type ErrorInfo } from '../../common/domain.js';
import type { TaskPreflight } from '../../common/environment.js';
import { useController, useFactory } from '../state/context.js';
import { loadRecentRepos, loadRepoDraft, rememberRepo, saveRepoDraft } from '../state/recent-repos.js';
import { toErrorInfo } from '../state/store.js';
import { missingAgentCredential } from '../../common/agent-credentials.js';
import { isStartKey, keysOf } from '../keyboard/shortcuts.js';
import { ErrorBox } from './ErrorBox.js';
import { RunOnSelect } from './hosts/RunOnSelect.js';
import { chosenRules, initialChoices, needsDecision, PreflightPanel, type EgressChoices } from './environment/PreflightPanel.js';
import { ActionIcon } from './icons.js';

/** The agents a task can choose; '' leaves it to the repo's .factory/pipeline.json, then the settings. */
export const AGENT_CHOICES: ReadonlyArray<{ value: string; label: string }> = [
  { value: '', label: 'Default (repository, then settings)' },
  { value: 'command', label: 'Command (pipeline.json commands)' },
  { value: 'claude-code', label: 'Claude Code' },
  { value: 'codex', label: 'Codex' },
];

/** What each agent will do, in one line under the choice: the Command agent skips what it has no command for. */
export const AGENT_DOES: Record<string, string> = {
  command:
    "Runs the commands of the repository's .factory/pipeline.json and a detected test command; a stage without a command (plan, review, document) is skipped. No model, no credential.",
  'claude-code': 'Claude Code plans, builds, tests with up to 2 repair rounds, reviews and documents, through an Anthropic credential stored here.',
  codex: 'Codex plans, builds, tests with up to 2 repair rounds, reviews and documents, through an OpenAI credential stored here.',
};

function agentLabel(name: string): string {
  return AGENT_CHOICES.find((c) => c.value === name)?.label.replace(/ \(.*\)$/, '') ?? name;
}

/** The folder's own name for a button label; the full path is its tooltip. */
function repoName(p: string): string {
  return p.replace(/[\\/]+$/, '').split(/[\\/]/).pop() || p;
}

export function NewTaskForm() {
  const controller = useController();
  // The typed path survives a reload; the recent ones are offered below the input.
  const [repoPath, setRepoPath] = useState(loadRepoDraft);
  const [recent, setRecent] = useState(loadRecentRepos);
  const [title, setTitle] = useState('');
  const [agent, setAgent] = useState('');
  const [allowPush, setAllowPush] = useState(false);
  // 'local', a sandbox host's name, or 'any'; offered only when hosts exist.
  const [runOn, setRunOn] = useState('local');
  const settings = useFactory((s) => s.settings);
  const hasTasks = useFactory((s) => Object.keys(s.tasks).length > 0);
  const open = useFactory((s) => s.formOpen) ?? !hasTasks;
  // After Start the form folds, so the new task's live terminal is what the window shows.
  const fold = () => controller.store.setState({ formOpen: false });
  const settingsError = useFactory((s) => s.settingsError);
  const credentials = useFactory((s) => s.credentials);
  const [error, setError] = useState<ErrorInfo>();
  const [dropNote, setDropNote] = useState<string>();
  const [dragging, setDragging] = useState(false);
  const [starting, setStarting] = useState(false);
  const [quickStarting, setQuickStarting] = useState(false);
  const [quickKeep, setQuickKeep] = useState(false);
  // What Start will do for the repository path it was asked for; asked again when the path changes.
  const [preflight, setPreflight] = useState<{ repoPath: string; agent: string; result: TaskPreflight; choices: EgressChoices; asked: boolean; used?: boolean }>();
  const canPickPath = typeof controller.bridge.pathForFile === 'function';
  const pickFolder = controller.bridge.pickRepoFolder;
  const taskInput = useRef<HTMLTextAreaElement>(null);
  const repoInput = useRef<HTMLInputElement>(null);
  const form = useRef<HTMLFormElement>(null);
  const agentNote = useRef<HTMLParagraphElement>(null);

  useEffect(() => saveRepoDraft(repoPath), [repoPath]);

  // The stored credentials (references only), so the agent's missing one is named before Start.
  useEffect(() => {
    void controller.loadCredentials().catch(() => {
      // No list (an older host, a locked keychain): Start's own check still names it.
    });
  }, [controller]);

  // The new-task shortcut: the first field still to fill takes the focus.
  const formFocus = useFactory((s) => s.formFocus);
  useEffect(() => {
    if (!formFocus) return;
    const field = repoInput.current?.value.trim() ? taskInput.current : repoInput.current;
    field?.focus();
    field?.scrollIntoView?.({ block: 'nearest' });
    // The input's value, not the state: this runs only when the shortcut asks.
  }, [formFocus]);

  // The tray's "New task…" (Electron) arrives here, with the folder it picked.
  useEffect(
    () =>
      controller.bridge.onNewTaskRequest?.((request) => {
        if (request.repoPath) setRepoPath(request.repoPath);
        taskInput.current?.focus();
      }),
    [controller],
  );

  // A sandbox and its shell, no pipeline: with the repository typed above, if any.
  const onQuick = async () => {
    setError(undefined);
    setQuickStarting(true);
    try {
      const repo = repoPath.trim();
      await controller.quickSandbox(repo || undefined, quickKeep);
      if (repo) setRecent(rememberRepo(repo));
      fold();
    } catch (err) {
      setError(toErrorInfo(err));
    } finally {
      setQuickStarting(false);
    }
  };

  // The agent's own TUI in a sandbox with the repository above; its work comes back for review.
  const onAgentSession = async () => {
    const repo = repoPath.trim();
    if (!repo) return;
    setError(undefined);
    setQuickStarting(true);
    try {
      await controller.agentSession(repo, agent === 'codex' ? 'codex' : 'claude-code');
      setRecent(rememberRepo(repo));
      fold();
    } catch (err) {
      setError(toErrorInfo(err));
    } finally {
      setQuickStarting(false);
    }
  };

  const onPick = async () => {
    try {
      const p = await pickFolder?.();
      if (p) setRepoPath(p);
    } catch (err) {
      setDropNote(toErrorInfo(err).message);
    }
  };

  const onDrop = (e: DragEvent) => {
    e.preventDefault();
    setDragging(false);
    const file = e.dataTransfer.files[0];
    if (!file) return setDropNote('Nothing was dropped: drop a repository folder.');
    if (!canPickPath) {
      // A browser never reveals where a dropped folder lives on disk.
      return setDropNote(`A browser cannot tell the app where "${file.name}" is on disk: type the repository path above.`);
    }
    try {
      const p = controller.bridge.pathForFile!(file);
      if (!p) return setDropNote(`"${file.name}" has no path on disk: drop a folder from your file manager.`);
      setRepoPath(p);
      setDropNote(undefined);
    } catch (err) {
      setDropNote(toErrorInfo(err).message);
    }
  };

  const [ways, setWays] = useState(1);
  const onSubmit = async (e: FormEvent) => {
    e.preventDefault();
    setError(undefined);
    setStarting(true);
    const path = repoPath.trim();
    try {
      // A preflight that already started a task is asked again: the next task decides for itself.
      let pf = preflight?.repoPath === path && preflight.agent === agent && !preflight.used ? preflight : undefined;
      if (!pf) {
        const result = await controller.preflight(path, undefined, agent || undefined);
        pf = { repoPath: path, agent, result, choices: initialChoices(result), asked: needsDecision(result) };
        setPreflight(pf);
        // The agent cannot sign in: the note under the agent says so and offers the fix; nothing starts.
        if (result.agent?.credentialMissing) {
          agentNote.current?.focus();
          return;
        }
        // The repository asks for egress the user has not decided on: show it and wait for Start again.
        if (pf.asked) return;
      }
      const requests = pf.result.egressRequests.length;
      if (ways > 1) {
        // Run N ways: one preparation, N sandboxes from it, compared side by side.
        await controller.createFanout(path, title, ways, agent || undefined, requests ? { rules: chosenRules(pf.result, pf.choices), remember: pf.choices.remember } : undefined);
      } else {
        await controller.createTask(path, title, agent || undefined, {
          allowPush,
          ...(runOn !== 'local' ? { host: runOn } : {}),
          ...(requests ? { egressApproval: { rules: chosenRules(pf.result, pf.choices), remember: pf.choices.remember } } : {}),
        });
      }
      setRecent(rememberRepo(repoPath));
      setTitle('');
      fold();
      setPreflight({ ...pf, asked: false, used: true });
    } catch (err) {
      setError(toErrorInfo(err));
    } finally {
      setStarting(false);
    }
  };

  const shown = preflight?.repoPath === repoPath.trim() ? preflight : undefined;
  // The agent Start would use as far as the form knows (the repository's own choice comes with the preflight).
  const effectiveAgent = agent || (shown?.agent === '' ? shown.result.agent?.name : undefined) || settings?.defaultAgent || '';
  // The live list when the form has it (a credential added since counts), else what Start's preflight said.
  const credentialMissing = credentials
    ? missingAgentCredential(effectiveAgent, credentials)
    : shown?.result.agent?.name === effectiveAgent
      ? shown.result.agent.credentialMissing
      : undefined;
  const startDisabled = starting || !repoPath.trim() || !title.trim();

  return (
    <section className="new-task-panel" data-region="new-task" aria-labelledby="new-task-heading">
      {/* A disclosure: open while there is no task and on Alt+N, folded after Start so the task's terminal has the room. */}
      <h2 id="new-task-heading">
        <button
          type="button"
          className="secondary"
          data-testid="new-task-toggle"
          aria-expanded={open}
          aria-controls="new-task-form"
          aria-keyshortcuts={keysOf('new-task')}
          title={`New task (${keysOf('new-task')})`}
          onClick={() => controller.store.setState({ formOpen: !open })}
        >
          <span aria-hidden="true">{open ? '▾' : '▸'}</span> New task
        </button>
      </h2>
    <form
      ref={form}
      id="new-task-form"
      className="new-task"
      data-testid="new-task-form"
      aria-labelledby="new-task-heading"
      hidden={!open}
      onSubmit={onSubmit}
      onKeyDown={(e) => {
        // Ctrl+Enter anywhere in the form starts, as Start would (not while Start is unavailable).
        if (!isStartKey(e.nativeEvent)) return;
        e.preventDefault();
        if (!startDisabled) form.current?.requestSubmit();
      }}
    >
      <div
        className={`drop-zone${dragging ? ' dragging' : ''}`}
        data-testid="drop-zone"
        onDragOver={(e) => {
          e.preventDefault();
          setDragging(true);
        }}
        onDragLeave={() => setDragging(false)}
        onDrop={onDrop}
      >
        <label>
          Repository
          <input
            ref={repoInput}
            type="text"
            aria-keyshortcuts={keysOf('new-task')}
            data-testid="repo-path-input"
            placeholder="/path/to/your/repository"
            value={repoPath}
            spellCheck={false}
            list={recent.length ? 'recent-repos' : undefined}
            onChange={(e) => setRepoPath(e.target.value)}
          />
        </label>
        {recent.length ? (
          <>
            <datalist id="recent-repos" data-testid="recent-repos-datalist">
              {recent.map((r) => (
                <option key={r} value={r} />
              ))}
            </datalist>
            <div className="recent-repos" role="group" aria-label="Recent repositories" data-testid="recent-repos">
              <span className="hint">Recent:</span>
              {recent.map((r) => (
                <button
                  key={r}
                  type="button"
                  className="secondary small"
                  title={r}
                  aria-label={`Use ${r}`}
                  aria-pressed={r === repoPath.trim()}
                  data-testid="recent-repo"
                  onClick={() => {
                    setRepoPath(r);
                    taskInput.current?.focus();
                  }}
                >
                  {repoName(r)}
                </button>
              ))}
            </div>
          </>
        ) : null}
        {pickFolder ? (
          <button type="button" className="secondary small" data-testid="pick-folder-button" onClick={() => void onPick()}>
            Choose folder…
          </button>
        ) : null}
        <p className="hint">
          {canPickPath ? 'Drop a repository folder here, or type its path.' : 'Type the repository path (a browser cannot read the path of a dropped folder).'}
        </p>
        {dropNote ? (
          <p className="note" data-testid="drop-note">
            {dropNote}
          </p>
        ) : null}
      </div>
      <label>
        Task
        <textarea
          ref={taskInput}
          aria-keyshortcuts={keysOf('new-task')}
          data-testid="task-text-input"
          placeholder="What should the agent do?"
          rows={3}
          value={title}
          onChange={(e) => setTitle(e.target.value)}
        />
      </label>
      <label>
        Agent
        <select data-testid="agent-select" aria-describedby={AGENT_DOES[effectiveAgent] ? 'agent-does' : undefined} value={agent} onChange={(e) => setAgent(e.target.value)}>
          {AGENT_CHOICES.map((c) => (
            <option key={c.value} value={c.value}>
              {c.value === '' && settings ? `Default (repository, else ${agentLabel(settings.defaultAgent)})` : c.label}
            </option>
          ))}
        </select>
      </label>
      <label>
        Ways
        <input
          type="number"
          data-testid="ways-input"
          min={1}
          max={MAX_WAYS}
          aria-describedby="ways-does"
          value={ways}
          onChange={(e) => setWays(Math.max(1, Math.min(MAX_WAYS, Math.trunc(Number(e.target.value)) || 1)))}
        />
      </label>
      <p className="hint" id="ways-does">
        {ways > 1 ? `${ways} sandboxes from one preparation, compared side by side; you approve one.` : 'Run it more than once to compare the results.'}
      </p>
      {AGENT_DOES[effectiveAgent] ? (
        <p className="hint" id="agent-does" data-testid="agent-does">
          {AGENT_DOES[effectiveAgent]}
        </p>
      ) : null}
      {credentialMissing ? (
        <p className="note" ref={agentNote} tabIndex={-1} role="status" data-testid="agent-credential-missing">
          <span>{credentialMissing[0]!.toUpperCase() + credentialMissing.slice(1)}.</span>{' '}
          <button type="button" className="small" data-testid="open-credentials" onClick={() => controller.showView('credentials')}>
            Open Credentials
          </button>{' '}
          {effectiveAgent !== 'command' ? (
            <button type="button" className="secondary small" data-testid="use-command-agent" onClick={() => setAgent('command')}>
              Use the Command agent
            </button>
          ) : null}
        </p>
      ) : null}
      {settings && agent && agent !== settings.defaultAgent ? (
        <button type="button" className="secondary small" data-testid="set-default-agent" onClick={() => void controller.setDefaultAgent(agent)}>
          Use {agentLabel(agent)} by default
        </button>
      ) : null}
      <RunOnSelect value={runOn} onChange={setRunOn} />
      <label className="checkbox" title="Off: the sandbox may fetch from the repository's https origin through the proxy but never push">
        <input type="checkbox" data-testid="allow-push-checkbox" checked={allowPush} onChange={(e) => setAllowPush(e.target.checked)} />
        Allow push to factory/&lt;id&gt;/* through the proxy
      </label>
      {settingsError ? <ErrorBox testId="settings-error" error={settingsError} /> : null}
      {shown ? (
        <PreflightPanel
          preflight={shown.result}
          choices={shown.choices}
          focusOnShow={shown.asked}
          onChange={(choices) => setPreflight({ ...shown, choices })}
        />
      ) : null}
      <div className="actions">
        <button type="submit" data-testid="start-button" aria-keyshortcuts="Control+Enter" title="Start (Ctrl+Enter in the form)" disabled={startDisabled}>
          <ActionIcon action="start" />
          {starting ? 'Starting…' : shown?.asked ? 'Start with these choices' : 'Start'}
        </button>
        <button
          type="button"
          className="secondary"
          data-testid="quick-sandbox-button"
          title={`A fresh sandbox with a shell and no pipeline (seeded with the repository above, if one is given); ${quickKeep ? 'it stays until you destroy it' : 'exiting the shell destroys it'}`}
          disabled={quickStarting}
          onClick={() => void onQuick()}
        >
          <ActionIcon action="quick" />
          {quickStarting ? 'Starting…' : repoPath.trim() ? `Quick sandbox with ${repoName(repoPath.trim())}` : 'Quick sandbox'}
        </button>
        <button
          type="button"
          className="secondary"
          data-testid="agent-session-button"
          title="The agent's own interactive session in a fresh sandbox with the repository above (Codex when chosen above, else Claude Code); when it exits, its work comes back for review"
          disabled={quickStarting || !repoPath.trim()}
          onClick={() => void onAgentSession()}
        >
          Agent session
        </button>
        <label className="quick-keep" title="Off: exiting its shell destroys the quick sandbox. On: it stays until you destroy it.">
          <input type="checkbox" data-testid="quick-sandbox-keep" checked={quickKeep} disabled={quickStarting} onChange={(e) => setQuickKeep(e.target.checked)} />
          Keep until I destroy it
        </label>
      </div>
      {error ? <ErrorBox testId="new-task-error" error={error} /> : null}
      {error?.name === 'AgentCredentialMissing' ? (
        <button type="button" className="small" data-testid="error-open-credentials" onClick={() => controller.showView('credentials')}>
          Open Credentials
        </button>
      ) : null}
    </form>
    </section>
  );
}
