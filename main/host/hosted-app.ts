// What a host (Electron IPC or the web host) needs from the app, and the one
// place where an untrusted call is validated, dispatched and turned into a reply.
// FactoryApp from main/app.ts satisfies HostedApp structurally.
import {
  parseCall,
  toWireError,
  type FactoryApi,
  type FactoryEvent,
  type TerminalDataEvent,
  type WireError,
} from '../../common/contract.js';

export interface HostedApp {
  api: FactoryApi;
  onEvent(listener: (e: FactoryEvent) => void): () => void;
  onTerminalData(listener: (e: TerminalDataEvent) => void): () => void;
}

export type CallReply = { result: unknown } | WireError;

/** Validates (parseCall) and runs one call; never throws: failures become the wire error format. */
export async function dispatchCall(api: FactoryApi, method: unknown, input: unknown): Promise<CallReply> {
  try {
    if (typeof method !== 'string') throw Object.assign(new Error('method must be a string'), { name: 'InvalidInput' });
    const call = parseCall(method, input);
    const fn = api[call.method] as (input: unknown) => Promise<unknown>;
    const result = await fn.call(api, call.input);
    return { result: result === undefined ? null : result };
  } catch (err) {
    return toWireError(err);
  }
}
