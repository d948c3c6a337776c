/**
 * Reading a report: the table `formatCheckReport` prints, and the assertion that throws on a
 * report that does not conform.
 */

import { CHECK_CASES, type CheckGroup, type CheckReport, type CheckRow, type CheckVerdict } from './table.ts';

/** The groups with at least one case that decides conformance. */
const JUDGED_GROUPS: ReadonlySet<CheckGroup> = new Set(CHECK_CASES.filter((c) => c.security).map((c) => c.group));

const VERDICT_LABEL: Record<CheckVerdict, string> = { pass: 'pass', fail: 'FAIL', not_observable: 'not observable', reported: 'reported' };

function pad(text: string, width: number): string {
  return text.length >= width ? `${text.slice(0, width - 2)}… ` : text.padEnd(width);
}

/**
 * The report as a readable table: one line per case (verdict, case, expected, observed, time),
 * the reason under every row that is not a plain pass, then a summary.
 *
 * @example
 * ```ts
 * const report = await checkEndpoint(url, { secrets });
 * console.log(formatCheckReport(report));
 * ```
 */
export function formatCheckReport(report: CheckReport, { curl = false }: { curl?: boolean } = {}): string {
  const lines: string[] = [];
  lines.push(`webhook-receiver check ${report.target}`);
  lines.push(
    `${report.keys} ${report.keys === 1 ? 'key' : 'keys'}, tolerance ${report.toleranceSeconds} s, unsigned ${report.unsigned === 'accept' ? 'accepted' : 'refused'}; ` +
      `${report.requests} ${report.requests === 1 ? 'request' : 'requests'} in ${(report.durationMs / 1000).toFixed(1)} s`,
  );
  lines.push('');
  lines.push(`  ${pad('verdict', 15)}${pad('case', 24)}${pad('expected', 22)}${pad('observed', 30)}time`);
  let group: CheckGroup | undefined;
  for (const row of report.rows) {
    if (row.group !== group) {
      group = row.group;
      lines.push(`${group}${JUDGED_GROUPS.has(group) ? '' : ' (not judged for conformance)'}`);
    }
    const time = row.ms === null ? '' : `${row.ms < 10 ? row.ms.toFixed(1) : Math.round(row.ms)} ms`;
    lines.push(`  ${pad(VERDICT_LABEL[row.verdict], 15)}${pad(row.id, 24)}${pad(row.expected, 22)}${pad(row.observed, 30)}${time}`.trimEnd());
    lines.push(`      ${row.title}${row.reason !== 'accepted' && row.reason !== 'refused' ? `: ${row.reason}` : ''}`);
    if (curl && row.curl !== '') lines.push(row.curl.split('\n').map((line) => `      ${line}`).join('\n'));
  }
  lines.push('');
  if (!report.reachable) {
    lines.push(`NOT REACHABLE: ${report.unreachableReason ?? 'no answer'}`);
  } else if (report.conforms) {
    const judged = report.rows.filter((r) => r.security && r.verdict === 'pass').length;
    const unobserved = report.rows.filter((r) => r.security && r.verdict === 'not_observable').length;
    lines.push(`CONFORMS: ${judged} security ${judged === 1 ? 'case' : 'cases'} passed${unobserved > 0 ? `, ${unobserved} not observable` : ''}`);
  } else {
    lines.push(`DOES NOT CONFORM: ${report.failures.length} security ${report.failures.length === 1 ? 'case' : 'cases'} failed: ${report.failures.map((r) => r.id).join(', ')}`);
  }
  for (const warning of report.warnings) lines.push(`warning: ${warning}`);
  if (report.reachable) lines.push('Deliveries carried webhook-ids starting msg_check_; the accepted ones ran the endpoint\'s handler.');
  return lines.join('\n');
}

/**
 * Thrown by {@link assertEndpointConforms}: the endpoint was unreachable or failed security cases.
 * `name` is `'AssertionError'`, so test runners show it as a failed assertion.
 *
 * @example
 * ```ts
 * try {
 *   assertEndpointConforms(report);
 * } catch (error) {
 *   if (error instanceof EndpointCheckError) console.log(error.failures.map((row) => row.id));
 * }
 * ```
 */
export class EndpointCheckError extends Error {
  /** The security rows that failed (empty when the endpoint was unreachable). */
  readonly failures: readonly CheckRow[];
  readonly report: CheckReport;

  constructor(report: CheckReport) {
    const failures = report.failures;
    const message = !report.reachable
      ? `expected ${report.target} to conform to Standard Webhooks, but it could not be reached: ${report.unreachableReason ?? 'no answer'}`
      : [
          `expected ${report.target} to conform to Standard Webhooks, but ${failures.length} security ${failures.length === 1 ? 'case' : 'cases'} failed:`,
          ...failures.map((row) => `  - ${row.id} (${row.title}): expected ${row.expected}, observed ${row.observed}: ${row.reason}`),
        ].join('\n');
    super(message);
    this.name = 'AssertionError';
    this.failures = failures;
    this.report = report;
  }
}

/**
 * Throws an {@link EndpointCheckError} listing every failed security case (or saying the endpoint
 * was unreachable); returns the report otherwise.
 *
 * @example
 * ```ts
 * import { checkEndpoint, assertEndpointConforms } from 'webhook-receiver/testing';
 * assertEndpointConforms(await checkEndpoint(app.fetch, { secrets, url: 'http://localhost/webhooks' }));
 * ```
 */
export function assertEndpointConforms(report: CheckReport): CheckReport {
  if (typeof report !== 'object' || report === null || !Array.isArray((report as Partial<CheckReport>).rows)) {
    throw new TypeError('assertEndpointConforms needs the report checkEndpoint resolved with');
  }
  if (!report.conforms) throw new EndpointCheckError(report);
  return report;
}
