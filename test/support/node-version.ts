/**
 * What runs on the Node that runs the tests (or the bench): the package supports Node 22 and
 * later, but two of the servers and engines it is tested with need a later minor.
 */

const [major = 0, minor = 0] = process.versions.node.split('.').map(Number);

/** fauxqs (the local SQS the SQS tests and the bench use) runs on Node 22.5 and later. */
export function fauxqsRuns(): boolean {
  return major > 22 || (major === 22 && minor >= 5);
}

/** pg-boss 12 runs on Node 22.12 and later. */
export function pgBossRuns(): boolean {
  return major > 22 || (major === 22 && minor >= 12);
}
