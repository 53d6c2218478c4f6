// Installs the aws emulators (owned by the aws issue). Filled in by that work.
export async function install() {}
