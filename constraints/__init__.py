"""The board's timing and pin files (``peach2.sdc``, ``peach2_pins.toml``) and the hard-IP
settings (``hardip_variants.md``): the repository's ``constraints/`` folder, installed as the
package ``peach2.constraints`` so that an installed ``peach2`` writes the Quartus project too.
:mod:`peach2.platform.board` finds them here."""
