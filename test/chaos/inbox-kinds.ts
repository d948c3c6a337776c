/** Which ids of the inbox chaos test fail, by their number (`msg_chaos_<n>`): shared by the test and its workers. */
export function kindOf(id: string): 'flaky' | 'poison' | 'plain' {
  const n = Number(id.slice(id.lastIndexOf('_') + 1));
  if (n % 50 === 7) return 'poison';
  if (n % 10 === 3) return 'flaky';
  return 'plain';
}
