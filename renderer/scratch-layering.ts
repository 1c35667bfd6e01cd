import { readFileSync } from 'node:fs';
export const scratch = readFileSync;
