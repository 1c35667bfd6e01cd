// What the Credentials screen needs from the host, as a narrow interface over
// the typed bridge (methods credentials.* / audit.list / leakcheck.*).
import type { z } from 'zod';
import type { CredentialApiMethod, CredentialApiOutputs, credentialApiInputs } from '../../common/credentials.js';

export type CredentialCall = <M extends CredentialApiMethod>(
  method: M,
  input: z.input<(typeof credentialApiInputs)[M]>,
) => Promise<CredentialApiOutputs[M]>;
