"""placeholder"""

from flask import Blueprint

bp = Blueprint("admin", __name__)
