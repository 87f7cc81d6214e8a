// Types of build-dashboard.mjs for the tests that import it.
export function dashboardUpToDate(root: string): boolean;
export function buildDashboard(root: string): Promise<boolean>;
