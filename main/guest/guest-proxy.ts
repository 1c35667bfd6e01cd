// Where a guest reaches the app's proxy: QEMU's user network forwards each guest
// connection to this address and port to the sandbox's proxy socket
// (credentials/routes.ts), and these are the variables that send guest programs
// there. One place, so the proxy, the routes and setup's tool settings agree.

/** The fixed guest address of the proxy (QEMU user-mode network). */
export const GUEST_PROXY_ADDRESS = '10.0.2.100';
export const GUEST_PROXY_PORT = 80;
/** The origin of the proxy's own routes (`/anthropic`, a git mount), port 80 implied. */
export const GUEST_PROXY_ORIGIN = `http://${GUEST_PROXY_ADDRESS}`;
/** The proxy as programs are told of it: HTTP(S)_PROXY, apt, npm, pip, git. */
export const GUEST_PROXY_URL = `${GUEST_PROXY_ORIGIN}:${GUEST_PROXY_PORT}`;
export const GUEST_NO_PROXY = `${GUEST_PROXY_ADDRESS},localhost,127.0.0.1`;

/**
 * Every guest program that honours the usual proxy variables sends other
 * destinations through the proxy (CONNECT for https, forward for http), where the
 * egress rules decide; the proxy's own routes are reached directly.
 */
export const GUEST_PROXY_ENV: Readonly<Record<string, string>> = {
  HTTP_PROXY: GUEST_PROXY_URL,
  HTTPS_PROXY: GUEST_PROXY_URL,
  http_proxy: GUEST_PROXY_URL,
  https_proxy: GUEST_PROXY_URL,
  NO_PROXY: GUEST_NO_PROXY,
  no_proxy: GUEST_NO_PROXY,
};
