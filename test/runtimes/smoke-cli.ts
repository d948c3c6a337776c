/** The suite's entry point on Bun and Deno: runs it and prints the report on one line. */

import { smoke } from './smoke.ts';

console.log(`SMOKE_REPORT ${JSON.stringify(await smoke())}`);
