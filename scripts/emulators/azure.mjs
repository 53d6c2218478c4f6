// Installs the azure emulators (owned by the azure issue). Filled in by that work.
export async function install() {}
