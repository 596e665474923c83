// Spreadsheet programs evaluate a cell that starts with one of these as a formula
// (tab and CR too, which some of them strip before looking).
const FORMULA_START = /^[=+\-@\t\r]/;

/**
 * Prefixes a cell that a spreadsheet program would run as a formula with a single quote,
 * so it shows as text. Applies to numbers too: "-5" becomes "'-5", which is why machine
 * consumers should turn escaping off.
 */
export function escapeFormula(cell: string): string {
  return FORMULA_START.test(cell) ? `'${cell}` : cell;
}
