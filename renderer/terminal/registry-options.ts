// What a terminal registry is configured with, and the metadata snapshot a
// view renders (never terminal bytes).
import type { ITerminalOptions } from '@xterm/xterm';
import type { TerminalInfo } from '../../common/domain.js';
import { DEFAULT_ACK, type AckBatcherOptions } from './ack-batcher.js';
import type { TerminalRendererKind } from './renderer-choice.js';
import { DEFAULT_PACING, type WritePacerOptions } from './write-pacer.js';

export type TerminalPhase = 'attaching' | 'attached' | 'failed';

/** Metadata a view may render (immutable snapshot; never holds terminal bytes). */
export interface TerminalSnapshot {
  sessionId: string;
  phase: TerminalPhase;
  info: TerminalInfo | null;
  error: string | null;
  renderer: TerminalRendererKind;
  /** Ctrl+M mode, shared by every terminal: Tab and Esc leave the terminal. */
  tabMovesFocus: boolean;
}

export interface TerminalRegistryOptions {
  /** Hidden instances kept alive after their view unmounts (least recently used go first). */
  maxHidden: number;
  /** Lines of scrollback in each xterm.js instance. */
  scrollbackLines: number;
  /** Try the WebGL renderer (falls back to the DOM renderer when unavailable or lost). */
  webgl: boolean;
  ack: AckBatcherOptions;
  /** How output is paced into xterm.js (how often a flood redraws). */
  pacing: WritePacerOptions;
  terminalOptions: ITerminalOptions;
}

export const DEFAULT_OPTIONS: TerminalRegistryOptions = {
  maxHidden: 8,
  scrollbackLines: 10_000,
  webgl: true,
  ack: DEFAULT_ACK,
  pacing: DEFAULT_PACING,
  terminalOptions: {
    fontFamily: 'ui-monospace, "SF Mono", Menlo, "DejaVu Sans Mono", Consolas, monospace',
    fontSize: 13,
    cursorBlink: true,
    theme: { background: '#0f1115', foreground: '#d7dae0', selectionBackground: '#3a4356' },
    // The terminal is dark in both colour schemes; xterm.js lifts any ANSI colour (red, grey…) to 4.5:1 on it (WCAG AA).
    minimumContrastRatio: 4.5,
  },
};

export const SEARCH_DECORATIONS = {
  matchBackground: '#5a4a00',
  matchOverviewRuler: '#d7b600',
  activeMatchBackground: '#a66a00',
  activeMatchColorOverviewRuler: '#ff9d00',
};
