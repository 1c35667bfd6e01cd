// The terminal UI: a React view per session and the registry of xterm.js
// instances behind it. See TerminalView for props; the view imports its own CSS.
export { TerminalView, type TerminalViewProps } from './TerminalView.js';
export { terminalRegistryFor } from './shared-registry.js';
export {
  TerminalRegistry,
  type TerminalPhase,
  type TerminalRegistryOptions,
  type TerminalRendererKind,
  type TerminalSnapshot,
} from './terminal-registry.js';
export { AckBatcher, type AckBatcherOptions } from './ack-batcher.js';
