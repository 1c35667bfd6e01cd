// The sandbox's ports moved to main/sandbox/sandbox-ports.ts (the warm pool
// needs them and sits below tasks/). Kept only for agent-session.ts's import;
// remove once it imports from ../sandbox/.
export type * from '../sandbox/sandbox-ports.js';
