import { shellQuote as viaPipeline } from '../pipeline/agents/shell.js';
export const scratch = viaPipeline;
