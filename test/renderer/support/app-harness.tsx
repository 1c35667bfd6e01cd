// The renderer in jsdom with a recording bridge in place of a host: what each
// renderer test mounts. The bridge answers from handlers and records every call.
import { render } from '@testing-library/react';
import type { ReactElement } from 'react';
import { type FactoryBridge, type FactoryEvent, type TerminalDataEvent } from '../../../common/contract.js';
import { FactoryError } from '../../../common/errors.js';
import { Listeners } from '../../../common/listeners.js';
import { App } from '../../../renderer/App.js';
import { ControllerContext } from '../../../renderer/state/context.js';
import { FactoryController } from '../../../renderer/state/controller.js';
import { createFactoryStore } from '../../../renderer/state/store.js';

export type Handlers = Record<string, (input: any) => unknown>;

/**
 * What a host answers when a test does not say: a repository with nothing to set
 * up and no egress requests, so Start goes straight on to tasks.create.
 */
export const HOST_DEFAULTS: Handlers = {
  'tasks.preflight': () => ({ source: 'none', lines: [], unsupported: [], egressRequests: [], cached: false }),
};

export class RecordingBridge implements FactoryBridge {
  calls: Array<{ method: string; input: unknown }> = [];
  events = new Listeners<FactoryEvent>();
  data = new Listeners<TerminalDataEvent>();
  constructor(public handlers: Handlers) {}
  async call(method: any, input: any): Promise<any> {
    this.calls.push({ method, input });
    const h = this.handlers[method] ?? HOST_DEFAULTS[method];
    if (!h) throw FactoryError.carried('NotImplemented', method);
    return h(input);
  }
  onEvent(l: (e: FactoryEvent) => void) {
    return this.events.add(l);
  }
  onTerminalData(l: (e: TerminalDataEvent) => void) {
    return this.data.add(l);
  }
  emit(e: FactoryEvent) {
    this.events.emit(e);
  }
  emitData(sessionId: string, text: string) {
    this.data.emit({ sessionId, data: new TextEncoder().encode(text) });
  }
  /** The inputs of every call of one method, in order. */
  inputs(method: string): unknown[] {
    return this.calls.filter((c) => c.method === method).map((c) => c.input);
  }
}

/** Renders `ui` (the whole App by default) with a started controller over `bridge`. */
export function mountWith(bridge: FactoryBridge, ui: ReactElement = <App />): FactoryController {
  const controller = new FactoryController(bridge, createFactoryStore());
  controller.start();
  render(<ControllerContext.Provider value={controller}>{ui}</ControllerContext.Provider>);
  return controller;
}
