// The terminal flow-control window both ends share: the host pauses a source
// once this many bytes sent to a viewer are not acknowledged
// (main/terminal/flow-control.ts), and the renderer writes what it holds once
// half of it is held (renderer/terminal/write-pacer.ts), so the host never waits
// out a pacing interval with its window full. Pure TypeScript: no Node, no DOM.

/** 2 MiB: room for the renderer to hold a flood for half a second and write it as one redraw. */
export const TERMINAL_WINDOW_BYTES = 2 * 1024 * 1024;
